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

-- The ledger's cells kept in hour order: every read of them is a range of hours (today's partial
-- day, the hourly usage series, utilization over a quarter, the window the scheduler loads), and
-- the primary key led with the node, so each read the whole table.
create table usage_hour_by_hour (
    hour integer not null,
    budget_node_id integer not null references budget_node (budget_node_id),
    cluster_id integer not null default 1 references cluster (cluster_id),
    charged_gpu_s real not null default 0,
    unallocated_gpu_s real not null default 0,
    demand_gpu_s real not null default 0,
    owed_gpu_s real not null default 0,
    sampled_gpu_s real not null default 0,
    utilized_gpu_s real not null default 0,
    primary key (hour, budget_node_id, cluster_id)
) without rowid;
insert into usage_hour_by_hour (hour, budget_node_id, cluster_id, charged_gpu_s, unallocated_gpu_s,
                                demand_gpu_s, owed_gpu_s, sampled_gpu_s, utilized_gpu_s)
    select hour, budget_node_id, cluster_id, charged_gpu_s, unallocated_gpu_s, demand_gpu_s,
           owed_gpu_s, sampled_gpu_s, utilized_gpu_s
    from usage_hour;
drop table usage_hour;
alter table usage_hour_by_hour rename to usage_hour;

-- The reports' waits: one row per day and cluster, every leaf's waits in it (24 bytes each), since
-- a review reads a quarter's days whole and rows cost more than bytes. Derived from the
-- workloads: rolled up again on the next read.
drop table wait_day;
create table wait_day (
    day integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    min_submitted integer not null,
    waits blob not null,
    primary key (day, cluster_id)
);
delete from wait_rollup_day;

-- Today's finished hours of waits, the same way (a review reads at most the last hour's first
-- starts from the workloads); dropped once their day is rolled up.
create table wait_hour (
    hour integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    min_submitted integer not null,
    waits blob not null,
    primary key (hour, cluster_id)
);

create table wait_rollup_hour (
    hour integer primary key
);
