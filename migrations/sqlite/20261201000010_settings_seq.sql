-- Bumped with every change of settings, so every replica (watching the lease row's counters)
-- applies a change made on another within a second.
alter table scheduler_lease add column settings_seq integer not null default 0;
