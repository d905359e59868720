-- The reports' waits, rolled up by the day workloads first started (reports/waits.rs). A first
-- start is written once, as it happens, so a finished day's rollup never changes. `waits` packs
-- each workload's submission time and wait (16 bytes each); `min_submitted` lets a report skip
-- days holding nothing submitted in its period.
create table wait_day (
    budget_node_id bigint not null references budget_node (budget_node_id),
    day bigint not null,
    min_submitted bigint not null,
    waits bytea not null,
    primary key (day, budget_node_id)
);

create table wait_rollup_day (
    day bigint primary key,
    rolled_at bigint not null
);

-- Today's first starts, and the workloads that never started (still queued, or cancelled first).
create index workload_by_first_start on workload (first_started_at);
create index workload_never_started on workload (submitted_at) where first_started_at is null;
