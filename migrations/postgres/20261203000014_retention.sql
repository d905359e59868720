-- Retention (workloads/retention.rs): when a finished workload's output was cleared and when its
-- events (all but preemptions and drains) were deleted, so its page can say so.
alter table workload add column output_removed_at bigint;
alter table workload add column events_removed_at bigint;
