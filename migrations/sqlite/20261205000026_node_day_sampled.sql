-- The daily rollups carry the GPU time agents sampled and its utilization, so the quarterly review
-- reads a quarter's utilization from 91 days per node instead of summing the hourly ledger (a
-- quarter at 8,192 GPUs: 330,000 cells). Derived from the ledger: dropped here and rolled up again
-- on the next read.
drop table node_day;
create table node_day (
    budget_node_id integer not null references budget_node (budget_node_id),
    day integer not null,
    cluster_id integer not null default 1 references cluster (cluster_id),
    charged_gpu_s real not null,
    unallocated_gpu_s real not null,
    owed_gpu_s real not null,
    tracked_gpu_s real not null,
    sampled_gpu_s real not null default 0,
    utilized_gpu_s real not null default 0,
    primary key (budget_node_id, day, cluster_id)
);
create index node_day_by_day on node_day (day);
delete from rollup_day;
