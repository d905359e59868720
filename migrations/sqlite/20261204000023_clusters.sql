-- Several clusters (named pools of nodes). The tree and its shares apply on every cluster; the
-- ledger is kept per cluster, so accounting, ranking and preemption are per cluster. Everything
-- that existed before belongs to the cluster `default`.
create table cluster (
    cluster_id integer primary key,
    name text not null unique,
    created_at integer not null
);
insert into cluster (cluster_id, name, created_at) values (1, 'default', 0);

-- SQLite cannot add a column with both a reference and a default: the server checks it.
alter table node add column cluster_id integer not null default 1;
alter table workload add column cluster_id integer not null default 1;
create index workload_by_cluster on workload (cluster_id, state);

-- The ledger's cells gain the cluster: a leaf's hour is booked once per cluster it ran on.
create table usage_hour_by_cluster (
    budget_node_id integer not null references budget_node (budget_node_id),
    hour integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    charged_gpu_s real not null default 0,
    unallocated_gpu_s real not null default 0,
    demand_gpu_s real not null default 0,
    owed_gpu_s real not null default 0,
    sampled_gpu_s real not null default 0,
    utilized_gpu_s real not null default 0,
    primary key (budget_node_id, hour, cluster_id)
);
insert into usage_hour_by_cluster (budget_node_id, hour, cluster_id, charged_gpu_s, unallocated_gpu_s,
                                   demand_gpu_s, owed_gpu_s, sampled_gpu_s, utilized_gpu_s)
    select budget_node_id, hour, 1, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s,
           sampled_gpu_s, utilized_gpu_s
    from usage_hour;
drop table usage_hour;
alter table usage_hour_by_cluster rename to usage_hour;

create table capacity_hour_by_cluster (
    hour integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    healthy_gpu_s real not null default 0,
    primary key (hour, cluster_id)
);
insert into capacity_hour_by_cluster (hour, cluster_id, healthy_gpu_s)
    select hour, 1, healthy_gpu_s from capacity_hour;
drop table capacity_hour;
alter table capacity_hour_by_cluster rename to capacity_hour;

-- Daily rollups per cluster as well (the review shows each cluster and the total). They are
-- derived from the ledger: dropped here and rolled up again on the next read.
drop table node_day;
create table node_day (
    budget_node_id integer not null references budget_node (budget_node_id),
    day integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    charged_gpu_s real not null,
    unallocated_gpu_s real not null,
    owed_gpu_s real not null,
    tracked_gpu_s real not null,
    primary key (budget_node_id, day, cluster_id)
);
create index node_day_by_day on node_day (day);
delete from rollup_day;

-- The waits' rollups per cluster too (derived from the workloads: rolled up again on next read).
drop table wait_day;
create table wait_day (
    budget_node_id integer not null references budget_node (budget_node_id),
    day integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    min_submitted integer not null,
    waits blob not null,
    primary key (day, budget_node_id, cluster_id)
);
delete from wait_rollup_day;
