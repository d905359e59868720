-- The activity chart's hours, rolled up once they are over (reports/activity_rollup.rs): seconds
-- waited and GPU-seconds asked for while waiting, the most waiting at once, the first starts'
-- waits (8 bytes each, packed) and the preemptions and drains by rule (JSON pairs).
create table activity_hour (
    hour integer primary key,
    waited_s integer not null,
    waited_gpu_s integer not null,
    peak integer not null,
    waits blob not null,
    stops text not null
);

-- How far the rollup has come, and the workloads waiting at that moment (8 bytes each).
create table activity_rollup (
    id integer primary key check (id = 1),
    upto integer not null,
    waiting blob not null
);

-- The period's preemptions and drains, without reading every event.
create index workload_event_stops on workload_event (at) where kind in ('preempted', 'drained');
