-- The ledger books each leaf's demand from the workloads' own times, every pass: those still
-- queued or running (workload_by_state), and those that ended since the last pass (this index).
create index workload_by_end on workload (ended_at);
