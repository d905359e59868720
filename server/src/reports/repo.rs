//! SQL the reports read: capacity and usage by hour, submissions, runs and stops over a period.

use super::rollup::NodeTotals;
use app::workloads::WorkloadState;
use sqlx::{AnyConnection, AnyExecutor, FromRow};

/// Healthy GPU-seconds over `[from, to)`, on one cluster or all of them: one row, however long
/// the period (a review adds up thousands of hours; fetched one by one they cost more than the
/// sums).
pub async fn capacity_sum(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
    cluster: Option<i64>,
) -> Result<f64, sqlx::Error> {
    let (sum,): (Option<f64>,) = sqlx::query_as(
        "select sum(healthy_gpu_s) from capacity_hour
         where hour >= $1 and hour < $2 and ($3 is null or cluster_id = $3)",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_one(db)
    .await?;
    Ok(sum.unwrap_or(0.0))
}

/// `(cluster, hour, healthy GPU-seconds)` over `[from, to)`.
pub async fn capacity_by_cluster(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, hour, healthy_gpu_s from capacity_hour where hour >= $1 and hour < $2
         order by cluster_id, hour",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// The first hour any cluster's capacity was recorded: reports have nothing before it.
pub async fn first_capacity_hour(db: impl AnyExecutor<'_>) -> Result<Option<i64>, sqlx::Error> {
    first_capacity_hour_of(db, None).await
}

/// The first hour capacity was recorded on cluster `cluster`, or on any (`None`).
pub async fn first_capacity_hour_of(
    db: impl AnyExecutor<'_>,
    cluster: Option<i64>,
) -> Result<Option<i64>, sqlx::Error> {
    let (first,): (Option<i64>,) =
        sqlx::query_as("select min(hour) from capacity_hour where $1 is null or cluster_id = $1")
            .bind(cluster)
            .fetch_one(db)
            .await?;
    Ok(first)
}

/// A workload alive at some point of the period, as the activity charts count it. Read in two
/// indexed halves (ended in or after the period; not ended), so a period late in a long history does
/// not scan every workload submitted before it.
#[derive(Debug, Clone, FromRow)]
pub struct ActiveWorkload {
    pub workload_id: i64,
    pub gpus: i64,
    pub min_runtime_s: i64,
    #[sqlx(try_from = "String")]
    pub state: WorkloadState,
    pub submitted_at: i64,
    pub first_started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

pub async fn workloads_between(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<ActiveWorkload>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, gpus, min_runtime_s, state, submitted_at, first_started_at, ended_at
         from workload where ended_at >= $1 and submitted_at < $2
         union all
         select workload_id, gpus, min_runtime_s, state, submitted_at, first_started_at, ended_at
         from workload where ended_at is null and submitted_at < $2
         order by workload_id",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// `(workload, started, ended)` of those workloads' runs, in start order per workload.
pub async fn runs_between(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, i64, Option<i64>)>, sqlx::Error> {
    sqlx::query_as(
        "select r.workload_id, r.started_at, r.ended_at from workload_run r
         where r.workload_id in (
             select workload_id from workload where ended_at >= $1 and submitted_at < $2
             union all
             select workload_id from workload where ended_at is null and submitted_at < $2)
         order by r.workload_id, r.started_at, r.workload_run_id",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// The workloads with these ids (ascending, as given or not), by id.
pub async fn workloads_by_id(
    db: &mut AnyConnection,
    ids: &[i64],
) -> Result<Vec<ActiveWorkload>, sqlx::Error> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        out.extend(
            sqlx::query_as::<_, ActiveWorkload>(&format!(
                "select workload_id, gpus, min_runtime_s, state, submitted_at, first_started_at, ended_at
                 from workload where workload_id in ({})",
                crate::db::id_list(chunk)
            ))
            .fetch_all(&mut *db)
            .await?,
        );
    }
    out.sort_unstable_by_key(|w| w.workload_id);
    Ok(out)
}

/// `(workload, started, ended)` of these workloads' runs, by workload, in start order.
pub async fn runs_by_workload(
    db: &mut AnyConnection,
    ids: &[i64],
) -> Result<Vec<(i64, i64, Option<i64>)>, sqlx::Error> {
    let mut out = Vec::new();
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        out.extend(
            sqlx::query_as::<_, (i64, i64, Option<i64>, i64)>(&format!(
                "select workload_id, started_at, ended_at, workload_run_id from workload_run
                 where workload_id in ({})",
                crate::db::id_list(chunk)
            ))
            .fetch_all(&mut *db)
            .await?,
        );
    }
    out.sort_unstable_by_key(|&(w, start, _, run)| (w, start, run));
    Ok(out.into_iter().map(|(w, s, e, _)| (w, s, e)).collect())
}

/// `(at, detail)` of the preemptions and drains in the period.
pub async fn stops_between(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    sqlx::query_as(
        "select at, detail from workload_event
         where kind in ('preempted', 'drained') and at >= $1 and at < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// The most GPUs any registered node has.
pub async fn largest_node(db: impl AnyExecutor<'_>) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("select max(gpu_count) from node")
        .fetch_one(db)
        .await
}

/// `(cluster, leaf, hour, charged, unallocated, demand, owed)` GPU-seconds over `[from, to)`.
pub async fn ledger_hours(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<LedgerHour>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s,
                sampled_gpu_s, utilized_gpu_s
         from usage_hour where hour >= $1 and hour < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// One leaf's hour of the ledger on one cluster.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct LedgerHour {
    pub cluster_id: i64,
    pub budget_node_id: i64,
    pub hour: i64,
    pub charged_gpu_s: f64,
    pub unallocated_gpu_s: f64,
    pub demand_gpu_s: f64,
    pub owed_gpu_s: f64,
    pub sampled_gpu_s: f64,
    pub utilized_gpu_s: f64,
}

/// `(leaf, GPU-seconds sampled, the same weighted by utilization)` over `[from, to)`, for the
/// leaves the agents sampled.
pub async fn utilization(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
    cluster: Option<i64>,
) -> Result<Vec<(i64, f64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, sum(sampled_gpu_s), sum(utilized_gpu_s) from usage_hour
         where hour >= $1 and hour < $2 and sampled_gpu_s > 0 and ($3 is null or cluster_id = $3)
         group by budget_node_id",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await
}

/// The days in `[first, last)` already rolled up.
pub async fn rolled_up_days(
    db: impl AnyExecutor<'_>,
    first: i64,
    last: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("select day from rollup_day where day >= $1 and day < $2")
        .bind(first)
        .bind(last)
        .fetch_all(db)
        .await
}

/// Removes a day's per-node totals (before they are rolled up again).
pub async fn clear_day(db: impl AnyExecutor<'_>, day: i64) -> Result<(), sqlx::Error> {
    sqlx::query("delete from node_day where day = $1")
        .bind(day)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn insert_node_day(
    db: impl AnyExecutor<'_>,
    node: i64,
    cluster: i64,
    day: i64,
    t: &NodeTotals,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        // Two readers may roll up the same finished day at once; both compute the same totals.
        "insert into node_day (budget_node_id, day, cluster_id, charged_gpu_s, unallocated_gpu_s, owed_gpu_s, tracked_gpu_s,
                               sampled_gpu_s, utilized_gpu_s)
         values ($1, $2, $7, $3, $4, $5, $6, $8, $9)
         on conflict (budget_node_id, day, cluster_id) do update set charged_gpu_s = excluded.charged_gpu_s,
             unallocated_gpu_s = excluded.unallocated_gpu_s, owed_gpu_s = excluded.owed_gpu_s,
             tracked_gpu_s = excluded.tracked_gpu_s, sampled_gpu_s = excluded.sampled_gpu_s,
             utilized_gpu_s = excluded.utilized_gpu_s",
    )
    .bind(node)
    .bind(day)
    .bind(t.charged_gpu_s)
    .bind(t.unallocated_gpu_s)
    .bind(t.owed_gpu_s)
    .bind(t.tracked_gpu_s)
    .bind(cluster)
    .bind(t.sampled_gpu_s)
    .bind(t.utilized_gpu_s)
    .execute(db)
    .await?;
    Ok(())
}

pub async fn mark_rolled_up(
    db: impl AnyExecutor<'_>,
    day: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("insert into rollup_day (day, rolled_at) values ($1, $2) on conflict (day) do update set rolled_at = excluded.rolled_at")
        .bind(day)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// `(node, charged, unallocated, owed, tracked, sampled, utilized)` summed over the rolled-up days
/// in `[from, to)`.
pub async fn day_sums(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
    cluster: Option<i64>,
) -> Result<Vec<(i64, f64, f64, f64, f64, f64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, sum(charged_gpu_s), sum(unallocated_gpu_s), sum(owed_gpu_s), sum(tracked_gpu_s),
                sum(sampled_gpu_s), sum(utilized_gpu_s)
         from node_day where day >= $1 and day < $2 and ($3 is null or cluster_id = $3)
         group by budget_node_id",
    )
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await
}

/// `(node, day, charged, unallocated, owed)` of the given nodes' rolled-up days in `[from, to)`.
pub async fn node_days(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
    nodes: &[i64],
    cluster: Option<i64>,
) -> Result<Vec<(i64, i64, f64, f64, f64)>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select budget_node_id, day, charged_gpu_s, unallocated_gpu_s, owed_gpu_s
         from node_day where day >= $1 and day < $2 and budget_node_id in ({})
              and ($3 is null or cluster_id = $3)",
        crate::db::id_list(nodes)
    ))
    .bind(from)
    .bind(to)
    .bind(cluster)
    .fetch_all(db)
    .await
}

/// Drops the rollups of the days from `first` to `last` (inclusive), so they are rolled up again.
pub async fn forget_rollups(
    db: impl AnyExecutor<'_>,
    first: i64,
    last: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("delete from rollup_day where day >= $1 and day <= $2")
        .bind(first)
        .bind(last)
        .execute(db)
        .await?;
    Ok(())
}
