-- The activity chart's hours, rolled up once they are over (reports/activity_rollup.rs): seconds
-- waited and GPU-seconds asked for while waiting, the most waiting at once, the first starts'
-- waits (8 bytes each, packed) and the preemptions and drains by rule (JSON pairs).
create table activity_hour (
    hour bigint primary key,
    waited_s bigint not null,
    waited_gpu_s bigint not null,
    peak bigint not null,
    waits bytea not null,
    stops text not null
);

-- How far the rollup has come, and the workloads waiting at that moment (8 bytes each).
create table activity_rollup (
    id bigint primary key check (id = 1),
    upto bigint not null,
    waiting bytea not null
);

-- The period's preemptions and drains, without reading every event.
create index workload_event_stops on workload_event (at) where kind in ('preempted', 'drained');

-- The ledger's cells by hour: every read of them is a range of hours (today's partial day, the
-- hourly usage series, utilization over a quarter, the window the scheduler loads), and the
-- primary key leads with the node.
create index usage_hour_by_hour on usage_hour (hour);
