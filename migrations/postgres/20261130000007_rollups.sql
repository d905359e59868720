-- Daily rollups of the hourly ledger for every tree node (leaves and inner nodes), so a quarter's
-- report sums ~100 rows a node instead of scanning every leaf-hour. `rollup_day` lists the days
-- rolled up; booking into a past hour deletes that day's entry so it is rolled up again.
create table node_day (
    budget_node_id bigint not null references budget_node (budget_node_id),
    day bigint not null,
    charged_gpu_s double precision not null,
    unallocated_gpu_s double precision not null,
    -- Σ_h min(f(n) · C_h, demand_h(n)): owed, hour by hour, at this node's level.
    owed_gpu_s double precision not null,
    -- Σ_h min(charged_h, owed_h): owed time delivered when it was owed.
    tracked_gpu_s double precision not null,
    primary key (budget_node_id, day)
);

create table rollup_day (
    day bigint primary key,
    rolled_at bigint not null
);

create index workload_by_submitted on workload (submitted_at);
