-- What each leaf was owed per hour (DESIGN §5): its funded rate capped by its demand,
-- min(f · healthy capacity, demanded GPUs), booked as time passes so reports only sum.
alter table usage_hour add column owed_gpu_s real not null default 0;
