//! SQL of the live runtime: runs started and ended by a decision (more follows from the ledger,
//! the lease and the snapshot).

use super::{
    ledger::RunToCharge,
    snapshot::{OpenRun, WorkloadRow},
};
use scheduler::{EndedRun, DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};
use sqlx::{AnyConnection, AnyExecutor, FromRow};
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

/// A workload's state and how many runs it has had: whether a decision read before still holds.
pub async fn workload_standing(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
) -> Result<Option<(String, i64)>, sqlx::Error> {
    sqlx::query_as("select state, run_count from workload where workload_id = $1")
        .bind(workload_id)
        .fetch_optional(db)
        .await
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
    sqlx::query(
        "update scheduler_lease set expires_at_ms = 0 where name = 'scheduler' and holder = $1",
    )
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
                started_at, run_count, cluster_id
         from workload where state in ('queued', 'running') order by workload_id",
    )
    .fetch_all(db)
    .await
}

/// What the queue looks like in one row, to compare with a copy of it: queued and running
/// workloads, of which running, their runs, and the newest id.
pub async fn active_summary(db: impl AnyExecutor<'_>) -> Result<ActiveSummary, sqlx::Error> {
    let (workloads, running, runs, newest): (i64, Option<i64>, Option<i64>, Option<i64>) =
        sqlx::query_as(
            "select count(*), cast(sum(case when state = 'running' then 1 else 0 end) as bigint),
                    cast(sum(run_count) as bigint), max(workload_id)
             from workload where state in ('queued', 'running')",
        )
        .fetch_one(db)
        .await?;
    Ok(ActiveSummary {
        workloads,
        running: running.unwrap_or(0),
        runs: runs.unwrap_or(0),
        newest: newest.unwrap_or(0),
    })
}

/// See [`active_summary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveSummary {
    pub workloads: i64,
    pub running: i64,
    pub runs: i64,
    pub newest: i64,
}

/// Every open run's GPUs, by node.
pub async fn open_runs(db: impl AnyExecutor<'_>) -> Result<Vec<OpenRun>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, node_id, gpu_indices from workload_run where ended_at is null order by node_id",
    )
    .fetch_all(db)
    .await
}

/// `(cluster, leaf, hour, charged)` GPU-seconds from `first_hour` on, in hour order.
pub async fn charged_since(
    db: impl AnyExecutor<'_>,
    first_hour: i64,
) -> Result<Vec<(i64, i64, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, hour, charged_gpu_s from usage_hour
         where hour >= $1 and charged_gpu_s > 0 order by hour, budget_node_id",
    )
    .bind(first_hour)
    .fetch_all(db)
    .await
}

/// As [`charged_since`], for the hours in `[from, to)`.
pub async fn charged_between(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, i64, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, hour, charged_gpu_s from usage_hour
         where hour >= $1 and hour < $2 and charged_gpu_s > 0 order by hour, budget_node_id",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// Runs of debug work (DESIGN §5) that ended after `since`, as `(cluster, run)`: what the fast
/// lane used within its window.
pub async fn debug_runs_ended_since(
    db: impl AnyExecutor<'_>,
    since: i64,
) -> Result<Vec<(i64, EndedRun)>, sqlx::Error> {
    let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
        "select n.cluster_id, r.gpus, r.started_at, r.ended_at from workload_run r
         join workload w on w.workload_id = r.workload_id
         join node n on n.node_id = r.node_id
         where r.ended_at > $1 and w.min_runtime_s > 0 and w.min_runtime_s <= $2
           and w.gpus <= $3",
    )
    .bind(since)
    .bind(DEBUG_MAX_MIN_RUNTIME)
    .bind(i64::from(DEBUG_MAX_GPUS))
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(cluster, gpus, started_at, ended_at)| {
            let run = EndedRun {
                gpus: gpus.clamp(0, i64::from(u32::MAX)) as u32,
                started_at,
                ended_at,
            };
            (cluster, run)
        })
        .collect())
}

/// Healthy GPU-seconds per cluster and hour from `first_hour` on.
pub async fn capacity_since(
    db: impl AnyExecutor<'_>,
    first_hour: i64,
) -> Result<BTreeMap<(i64, i64), f64>, sqlx::Error> {
    let rows: Vec<(i64, i64, f64)> = sqlx::query_as(
        "select cluster_id, hour, healthy_gpu_s from capacity_hour where hour >= $1 order by hour",
    )
    .bind(first_hour)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(cluster, hour, gpu_s)| ((cluster, hour), gpu_s))
        .collect())
}

/// A ledger cell: `(cluster, leaf, hour, GPU-seconds)`.
pub type Cell = (i64, i64, i64, f64);

/// Adds GPU-seconds to a `usage_hour` column (`charged_gpu_s`, `unallocated_gpu_s`,
/// `demand_gpu_s`) of one leaf's hour on one cluster.
pub async fn add_usage(
    db: &mut AnyConnection,
    column: &str,
    cell: Cell,
) -> Result<(), sqlx::Error> {
    add_usage_many(db, column, &[cell]).await
}

/// Adds GPU-seconds to many cells of one `usage_hour` column (`charged_gpu_s`,
/// `unallocated_gpu_s`, `demand_gpu_s`), a hundred rows per statement: a pass books every leaf's
/// hour at once, and one statement per cell held SQLite's write lock for tens of milliseconds.
pub async fn add_usage_many(
    db: &mut AnyConnection,
    column: &str,
    cells: &[Cell],
) -> Result<(), sqlx::Error> {
    let column = match column {
        "charged_gpu_s" => "charged_gpu_s",
        "unallocated_gpu_s" => "unallocated_gpu_s",
        _ => "demand_gpu_s",
    };
    let add = format!("{column} = usage_hour.{column} + excluded.{column}");
    upsert_cells(db, column, &add, cells).await
}

/// Sets what is owed to many cells that exist (each has demand booked).
pub async fn set_owed_many(db: &mut AnyConnection, cells: &[Cell]) -> Result<(), sqlx::Error> {
    upsert_cells(db, "owed_gpu_s", "owed_gpu_s = excluded.owed_gpu_s", cells).await
}

/// Writes cells into `column` of `usage_hour`, `update` deciding what an existing cell becomes.
async fn upsert_cells(
    db: &mut AnyConnection,
    column: &str,
    update: &str,
    cells: &[Cell],
) -> Result<(), sqlx::Error> {
    for chunk in cells.chunks(CELLS_PER_STATEMENT) {
        let sql = format!(
            "insert into usage_hour (cluster_id, budget_node_id, hour, {column}) values {}
             on conflict (budget_node_id, hour, cluster_id) do update set {update}",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(&sql);
        for &(cluster, leaf, hour, value) in chunk {
            query = query.bind(cluster).bind(leaf).bind(hour).bind(value);
        }
        query.execute(&mut *db).await?;
    }
    Ok(())
}

/// Rows per multi-row statement: 400 parameters, well inside both engines' limits.
const CELLS_PER_STATEMENT: usize = 100;

/// `($1, $2, $3, $4), ($5, …), …` for `rows` rows of four.
fn placeholders(rows: usize) -> String {
    (0..rows)
        .map(|r| {
            format!(
                "(${}, ${}, ${}, ${})",
                4 * r + 1,
                4 * r + 2,
                4 * r + 3,
                4 * r + 4
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An open run with what charging it needs.
pub async fn run_to_charge(
    db: impl AnyExecutor<'_>,
    run_id: i64,
) -> Result<Option<RunToCharge>, sqlx::Error> {
    sqlx::query_as(
        "select r.workload_run_id, w.budget_node_id, r.gpus, r.allocated, r.charged_through, n.cluster_id
         from workload_run r join workload w on w.workload_id = r.workload_id
              join node n on n.node_id = r.node_id
         where r.workload_run_id = $1 and r.ended_at is null",
    )
    .bind(run_id)
    .fetch_optional(db)
    .await
}

/// Every open run not yet charged up to `now`.
pub async fn runs_to_charge(
    db: impl AnyExecutor<'_>,
    now: i64,
) -> Result<Vec<RunToCharge>, sqlx::Error> {
    sqlx::query_as(
        "select r.workload_run_id, w.budget_node_id, r.gpus, r.allocated, r.charged_through, n.cluster_id
         from workload_run r join workload w on w.workload_id = r.workload_id
              join node n on n.node_id = r.node_id
         where r.ended_at is null and r.charged_through < $1",
    )
    .bind(now)
    .fetch_all(db)
    .await
}

pub async fn set_charged_through(
    db: impl AnyExecutor<'_>,
    run_id: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("update workload_run set charged_through = $2 where workload_run_id = $1")
        .bind(run_id)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// Moves every open run's charge cursor to `now`.
pub async fn advance_open_runs(db: impl AnyExecutor<'_>, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update workload_run set charged_through = $1 where ended_at is null and charged_through < $1",
    )
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

/// How far the ledger's cursor `name` has booked (`demand`, `capacity`).
pub async fn ledger_cursor(
    db: impl AnyExecutor<'_>,
    name: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("select through from ledger_cursor where name = $1")
        .bind(name)
        .fetch_optional(db)
        .await
}

pub async fn set_ledger_cursor(
    db: impl AnyExecutor<'_>,
    name: &str,
    through: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into ledger_cursor (name, through) values ($1, $2)
         on conflict (name) do update set through = excluded.through",
    )
    .bind(name)
    .bind(through)
    .execute(db)
    .await?;
    Ok(())
}

/// Adds healthy GPU-seconds to a cluster's hour.
pub async fn add_capacity(
    db: impl AnyExecutor<'_>,
    cluster: i64,
    hour: i64,
    gpu_s: f64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into capacity_hour (cluster_id, hour, healthy_gpu_s) values ($1, $2, $3)
         on conflict (hour, cluster_id) do update set healthy_gpu_s = capacity_hour.healthy_gpu_s + excluded.healthy_gpu_s",
    )
    .bind(cluster)
    .bind(hour)
    .bind(gpu_s)
    .execute(db)
    .await?;
    Ok(())
}

/// Each leaf's allocated demand per cluster over `[a, b)` in GPU-seconds: `gpus × (min(end, b) −
/// max(submitted, a))` over its allocated workloads alive at some point of it — those still queued
/// or running (no end yet), and those that ended after `a`.
pub async fn allocated_demand(
    db: &mut AnyConnection,
    a: i64,
    b: i64,
) -> Result<BTreeMap<(i64, i64), i64>, sqlx::Error> {
    let overlap = "gpus * ((case when ended_at is null or ended_at > $2 then $2 else ended_at end)
                          - (case when submitted_at > $1 then submitted_at else $1 end))";
    let mut demand: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for filter in [
        "state in ('queued', 'running')",
        "ended_at > $1 and state not in ('queued', 'running')",
    ] {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(&format!(
            "select cluster_id, budget_node_id, cast(sum({overlap}) as bigint) from workload
             where {filter} and min_runtime_s > 0 and submitted_at < $2
             group by cluster_id, budget_node_id order by cluster_id, budget_node_id"
        ))
        .bind(a)
        .bind(b)
        .fetch_all(&mut *db)
        .await?;
        for (cluster, leaf, gpu_s) in rows {
            *demand.entry((cluster, leaf)).or_default() += gpu_s;
        }
    }
    Ok(demand)
}

/// Each cluster's healthy GPU-seconds in the hour (clusters with none booked are absent).
pub async fn capacity_at(
    db: impl AnyExecutor<'_>,
    hour: i64,
) -> Result<BTreeMap<i64, f64>, sqlx::Error> {
    let rows: Vec<(i64, f64)> =
        sqlx::query_as("select cluster_id, healthy_gpu_s from capacity_hour where hour = $1")
            .bind(hour)
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}

/// `(cluster, leaf, demand)` GPU-seconds of the hour.
pub async fn demand_at(
    db: impl AnyExecutor<'_>,
    hour: i64,
) -> Result<Vec<(i64, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, demand_gpu_s from usage_hour where hour = $1
         order by cluster_id, budget_node_id",
    )
    .bind(hour)
    .fetch_all(db)
    .await
}

/// The rows of these workloads, whatever their state (the caller keeps the active ones).
pub async fn workloads_by_id(
    db: &mut AnyConnection,
    ids: &[i64],
) -> Result<Vec<WorkloadRow>, sqlx::Error> {
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        rows.extend(
            sqlx::query_as::<_, WorkloadRow>(&format!(
                "select workload_id, budget_node_id, name, gpus, min_runtime_s, resumable, priority, state,
                        submitted_at, started_at, run_count, cluster_id
                 from workload where workload_id in ({})",
                crate::db::id_list(chunk)
            ))
            .fetch_all(&mut *db)
            .await?,
        );
    }
    Ok(rows)
}

/// The open runs of these workloads.
pub async fn open_runs_by_workload(
    db: &mut AnyConnection,
    ids: &[i64],
) -> Result<Vec<OpenRun>, sqlx::Error> {
    let mut runs = Vec::new();
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        runs.extend(
            sqlx::query_as::<_, OpenRun>(&format!(
                "select workload_id, node_id, gpu_indices from workload_run
                 where ended_at is null and workload_id in ({})",
                crate::db::id_list(chunk)
            ))
            .fetch_all(&mut *db)
            .await?,
        );
    }
    Ok(runs)
}
