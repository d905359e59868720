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

-- The reports' waits: one row per day and cluster, every leaf's waits in it (24 bytes each), since
-- a review reads a quarter's days whole and rows cost more than bytes. Derived from the
-- workloads: rolled up again on the next read.
drop table wait_day;
create table wait_day (
    day bigint not null,
    cluster_id bigint not null default 1 references cluster (cluster_id),
    min_submitted bigint not null,
    waits bytea not null,
    primary key (day, cluster_id)
);
delete from wait_rollup_day;

-- Today's finished hours of waits, the same way (a review reads at most the last hour's first
-- starts from the workloads); dropped once their day is rolled up.
create table wait_hour (
    hour bigint not null,
    cluster_id bigint not null default 1 references cluster (cluster_id),
    min_submitted bigint not null,
    waits bytea not null,
    primary key (hour, cluster_id)
);

create table wait_rollup_hour (
    hour bigint primary key
);
