-- What each leaf was owed per hour (DESIGN §5): min(f · C_h, demand_h), kept current by the
-- runtime as the hour fills, so reports only sum it.
alter table usage_hour add column owed_gpu_s double precision not null default 0;
