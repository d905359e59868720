//! SQL of the live runtime: runs started and ended by a decision (more follows from the ledger,
//! the lease and the snapshot).

use super::snapshot::{OpenRun, WorkloadRow};
use sqlx::{AnyExecutor, FromRow};
use std::collections::BTreeMap;

/// Opens a run of the workload on one node; it is charged from `now`.
#[allow(clippy::too_many_arguments)]
pub async fn insert_run(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    node_id: i64,
    gpu_indices: &str,
    gpus: i64,
    allocated: bool,
    now: i64,
    protected_until: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into workload_run (workload_id, node_id, gpu_indices, gpus, allocated, started_at, protected_until,
                                   charged_through)
         values ($1, $2, $3, $4, $5, $6, $7, $6)",
    )
    .bind(workload_id)
    .bind(node_id)
    .bind(gpu_indices)
    .bind(gpus)
    .bind(i64::from(allocated))
    .bind(now)
    .bind(protected_until)
    .execute(db)
    .await?;
    Ok(())
}

pub async fn mark_running(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    now: i64,
    protected_until: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update workload set state = 'running', started_at = $2, first_started_at = coalesce(first_started_at, $2),
                protected_until = $3, run_count = run_count + 1
         where workload_id = $1",
    )
    .bind(workload_id)
    .bind(now)
    .bind(protected_until)
    .execute(db)
    .await?;
    Ok(())
}

/// `(run, node)` of the workload's open runs.
pub async fn open_runs_of(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
) -> Result<Vec<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "select workload_run_id, node_id from workload_run where workload_id = $1 and ended_at is null",
    )
    .bind(workload_id)
    .fetch_all(db)
    .await
}

pub async fn end_run(
    db: impl AnyExecutor<'_>,
    run_id: i64,
    now: i64,
    end_kind: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("update workload_run set ended_at = $2, end_kind = $3 where workload_run_id = $1")
        .bind(run_id)
        .bind(now)
        .bind(end_kind)
        .execute(db)
        .await?;
    Ok(())
}

/// Takes or renews the scheduler lease for `holder` until `expires_at_ms`, if it is free (expired
/// before `now_ms`) or already `holder`'s; returns its epoch when held.
pub async fn claim_lease(
    db: impl AnyExecutor<'_>,
    holder: &str,
    expires_at_ms: i64,
    now_ms: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let row: Option<(i64,)> = sqlx::query_as(
        "update scheduler_lease
         set epoch = case when holder = $1 then epoch else epoch + 1 end,
             holder = $1, expires_at_ms = $2
         where name = 'scheduler' and (holder = $1 or expires_at_ms < $3)
         returning epoch",
    )
    .bind(holder)
    .bind(expires_at_ms)
    .bind(now_ms)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|(epoch,)| epoch))
}

pub async fn release_lease(db: impl AnyExecutor<'_>, holder: &str) -> Result<(), sqlx::Error> {
    sqlx::query("update scheduler_lease set expires_at_ms = 0 where name = 'scheduler' and holder = $1")
        .bind(holder)
        .execute(db)
        .await?;
    Ok(())
}

/// The replicas' relays: wake-ups for the leader, changed assignments, changed settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromRow)]
pub struct Counters {
    pub wake_seq: i64,
    pub assign_seq: i64,
    pub settings_seq: i64,
}

pub async fn counters(db: impl AnyExecutor<'_>) -> Result<Counters, sqlx::Error> {
    sqlx::query_as(
        "select wake_seq, assign_seq, settings_seq from scheduler_lease where name = 'scheduler'",
    )
    .fetch_one(db)
    .await
}

/// Bumps one of the relay counters (`wake_seq`, `assign_seq` or `settings_seq`).
pub async fn bump_counter(db: impl AnyExecutor<'_>, counter: &str) -> Result<(), sqlx::Error> {
    let counter = match counter {
        "wake_seq" => "wake_seq",
        "assign_seq" => "assign_seq",
        _ => "settings_seq",
    };
    sqlx::query(&format!(
        "update scheduler_lease set {counter} = {counter} + 1 where name = 'scheduler'"
    ))
    .execute(db)
    .await?;
    Ok(())
}

/// Queued and running workloads, by id.
pub async fn active_workloads(db: impl AnyExecutor<'_>) -> Result<Vec<WorkloadRow>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, budget_node_id, name, gpus, min_runtime_s, resumable, priority, state, submitted_at,
                started_at, run_count
         from workload where state in ('queued', 'running') order by workload_id",
    )
    .fetch_all(db)
    .await
}

/// Every open run's GPUs, by node.
pub async fn open_runs(db: impl AnyExecutor<'_>) -> Result<Vec<OpenRun>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, node_id, gpu_indices from workload_run where ended_at is null order by node_id",
    )
    .fetch_all(db)
    .await
}

/// `(leaf, hour, charged)` GPU-seconds from `first_hour` on, in hour order.
pub async fn charged_since(
    db: impl AnyExecutor<'_>,
    first_hour: i64,
) -> Result<Vec<(i64, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, hour, charged_gpu_s from usage_hour where hour >= $1 and charged_gpu_s > 0 order by hour, budget_node_id",
    )
    .bind(first_hour)
    .fetch_all(db)
    .await
}

/// Healthy GPU-seconds per hour from `first_hour` on.
pub async fn capacity_since(
    db: impl AnyExecutor<'_>,
    first_hour: i64,
) -> Result<BTreeMap<i64, f64>, sqlx::Error> {
    let rows: Vec<(i64, f64)> =
        sqlx::query_as("select hour, healthy_gpu_s from capacity_hour where hour >= $1 order by hour")
            .bind(first_hour)
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}
