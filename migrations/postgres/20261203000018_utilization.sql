-- GPU utilization sampled by the agents (nvidia-smi): per run, the sum and count of its GPUs'
-- samples (its mean); per workload, a coarse series in 5-minute buckets; per leaf and hour, the
-- GPU-seconds sampled and the same weighted by utilization; per node, each GPU's latest sample.
alter table workload_run add column util_sum double precision not null default 0;
alter table workload_run add column util_samples bigint not null default 0;
create table utilization_bucket (
    workload_id bigint not null references workload (workload_id),
    bucket bigint not null,
    util_sum double precision not null,
    samples bigint not null,
    primary key (workload_id, bucket)
);
alter table usage_hour add column sampled_gpu_s double precision not null default 0;
alter table usage_hour add column utilized_gpu_s double precision not null default 0;
alter table node add column gpu_utilization text not null default '';
