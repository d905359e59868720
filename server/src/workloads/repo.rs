//! SQL for workloads and their events.

use crate::db::Flag;
use app::workloads::{reasons::Event, EventView, WorkloadState, WorkloadView};
use sqlx::{AnyExecutor, FromRow};
use std::collections::HashMap;

const SELECT: &str = "select w.workload_id, w.name, b.path as project, u.username as owner, w.command, w.gpus,
        w.min_runtime_s, w.resumable, w.priority, w.state, w.submitted_at, w.first_started_at, w.started_at,
        w.protected_until, w.ended_at, w.exit_code, w.run_count, w.progress_s, w.user_id, c.name as cluster
    from workload w join budget_node b on b.budget_node_id = w.budget_node_id join \"user\" u on u.user_id = w.user_id
         join cluster c on c.cluster_id = w.cluster_id";

/// A row of [`SELECT`]; `resumable` is a 0/1 column, read through [`crate::db::Flag`].
#[derive(FromRow)]
struct WorkloadRow {
    workload_id: i64,
    name: String,
    project: String,
    owner: String,
    command: String,
    gpus: i64,
    min_runtime_s: i64,
    #[sqlx(try_from = "crate::db::Flag")]
    resumable: bool,
    priority: i64,
    #[sqlx(try_from = "String")]
    state: WorkloadState,
    submitted_at: i64,
    first_started_at: Option<i64>,
    started_at: Option<i64>,
    protected_until: Option<i64>,
    ended_at: Option<i64>,
    exit_code: Option<i64>,
    run_count: i64,
    progress_s: i64,
    user_id: i64,
    cluster: String,
}

impl From<WorkloadRow> for WorkloadView {
    fn from(row: WorkloadRow) -> Self {
        WorkloadView {
            id: row.workload_id,
            name: row.name,
            project: row.project,
            owner: row.owner,
            command: row.command,
            gpus: row.gpus,
            min_runtime_s: row.min_runtime_s,
            resumable: row.resumable,
            priority: row.priority,
            state: row.state,
            submitted_at: row.submitted_at,
            first_started_at: row.first_started_at,
            started_at: row.started_at,
            protected_until: row.protected_until,
            ended_at: row.ended_at,
            exit_code: row.exit_code,
            run_count: row.run_count,
            progress_s: row.progress_s,
            idle_for_s: None,
            user_id: row.user_id,
            cluster: row.cluster,
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub async fn insert_workload(
    db: impl AnyExecutor<'_>,
    user_id: i64,
    leaf_id: i64,
    name: &str,
    command: &str,
    gpus: u32,
    min_runtime_s: i64,
    resumable: bool,
    priority: i32,
    cluster_id: i64,
    now: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s, resumable, priority,
                               state, submitted_at, queued_at, cluster_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', $9, $9, $10) returning workload_id",
    )
    .bind(user_id)
    .bind(leaf_id)
    .bind(name)
    .bind(command)
    .bind(gpus as i64)
    .bind(min_runtime_s)
    .bind(i64::from(resumable))
    .bind(priority)
    .bind(now)
    .bind(cluster_id)
    .fetch_one(db)
    .await
}

pub async fn find_workload(
    db: impl AnyExecutor<'_>,
    id: i64,
) -> Result<Option<WorkloadView>, sqlx::Error> {
    let row: Option<WorkloadRow> = sqlx::query_as(&format!("{SELECT} where w.workload_id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await?;
    Ok(row.map(WorkloadView::from))
}

/// The newest `limit` workloads (of `user_id`, in `state`, on `cluster_id`), each running one
/// with how long it has held its GPUs nearly idle as of `now`.
pub async fn list_workloads(
    pool: &sqlx::AnyPool,
    user_id: Option<i64>,
    state: Option<WorkloadState>,
    cluster_id: Option<i64>,
    limit: i64,
    now: i64,
) -> Result<Vec<WorkloadView>, sqlx::Error> {
    let mut db = pool.acquire().await?;
    let rows: Vec<WorkloadRow> = sqlx::query_as(&format!(
        "{SELECT} where ($1 is null or w.user_id = $1) and ($2 is null or w.state = $2)
                    and ($4 is null or w.cluster_id = $4)
         order by w.workload_id desc limit $3"
    ))
    .bind(user_id)
    .bind(state.map(WorkloadState::as_str))
    .bind(limit)
    .bind(cluster_id)
    .fetch_all(&mut *db)
    .await?;
    let mut list: Vec<WorkloadView> = rows.into_iter().map(WorkloadView::from).collect();
    flag_idle(&mut db, &mut list, now).await?;
    Ok(list)
}

/// Sets how long each running workload of `list` has held its GPUs nearly idle, as far back as
/// the flag needs (an hour and a bucket).
async fn flag_idle(
    db: &mut sqlx::AnyConnection,
    list: &mut [WorkloadView],
    now: i64,
) -> Result<(), sqlx::Error> {
    let bucket_s = crate::agent::utilization::BUCKET_S;
    let since = now - app::workloads::IDLE_FLAG_S - 2 * bucket_s;
    let running: Vec<i64> = list
        .iter()
        .filter(|w| w.state == WorkloadState::Running)
        .map(|w| w.id)
        .collect();
    let mut series: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    for chunk in running.chunks(crate::db::ID_CHUNK) {
        let rows: Vec<(i64, i64, f64, i64)> = sqlx::query_as(&format!(
            "select workload_id, bucket, util_sum, samples from utilization_bucket
             where workload_id in ({}) and bucket >= $1 and samples > 0
             order by workload_id, bucket",
            crate::db::id_list(chunk)
        ))
        .bind(since)
        .fetch_all(&mut *db)
        .await?;
        for (id, bucket, sum, n) in rows {
            series
                .entry(id)
                .or_default()
                .push((bucket, sum / n as f64 / 100.0));
        }
    }
    for w in list.iter_mut() {
        if let Some(s) = series.get(&w.id) {
            w.idle_for_s = app::workloads::Utilization::idle_for(s, now, bucket_s);
        }
    }
    Ok(())
}

/// These workloads (any that exist), in no particular order.
pub async fn find_workloads(
    db: &mut sqlx::AnyConnection,
    ids: &[i64],
) -> Result<Vec<WorkloadView>, sqlx::Error> {
    let mut views = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        let list = crate::db::id_list(chunk);
        let rows: Vec<WorkloadRow> =
            sqlx::query_as(&format!("{SELECT} where w.workload_id in ({list})"))
                .fetch_all(&mut *db)
                .await?;
        views.extend(rows.into_iter().map(WorkloadView::from));
    }
    Ok(views)
}

pub async fn events(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
) -> Result<Vec<EventView>, sqlx::Error> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "select at, kind, detail from workload_event where workload_id = $1 order by workload_event_id",
    )
    .bind(workload_id)
    .fetch_all(db)
    .await?;
    // `detail` is JSON kept as text on both engines.
    rows.into_iter()
        .map(|(at, kind, detail)| {
            let event = Event::from_parts(&kind, &detail)
                .map_err(|error| sqlx::Error::Decode(Box::new(error)))?;
            Ok(EventView { at, event })
        })
        .collect()
}

pub async fn insert_event(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    at: i64,
    node_id: Option<i64>,
    event: &Event,
) -> Result<(), sqlx::Error> {
    sqlx::query("insert into workload_event (workload_id, at, kind, node_id, detail) values ($1, $2, $3, $4, $5)")
        .bind(workload_id)
        .bind(at)
        .bind(event.kind())
        .bind(node_id)
        .bind(event.detail_json())
        .execute(db)
        .await?;
    Ok(())
}

/// The current placement: `(node name, gpu indices)` of each open run.
pub async fn placement(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as(
        "select n.name, r.gpu_indices from workload_run r join node n on n.node_id = r.node_id
         where r.workload_id = $1 and r.ended_at is null order by n.name",
    )
    .bind(workload_id)
    .fetch_all(db)
    .await
}

/// A workload's GPU utilization as sampled (see [`crate::agent::utilization`]): `None` before
/// any sample.
pub async fn utilization(
    pool: &sqlx::AnyPool,
    id: i64,
    running: bool,
    now: i64,
) -> Result<Option<app::workloads::Utilization>, sqlx::Error> {
    let (sum, samples, measured): (f64, i64, i64) = sqlx::query_as(
        "select coalesce(sum(r.util_sum), 0.0), cast(coalesce(sum(r.util_samples), 0) as bigint),
                count(case when r.util_samples > 0 and n.gpu_model <> 'simulated' then 1 end)
         from workload_run r join node n on n.node_id = r.node_id where r.workload_id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?;
    if samples == 0 {
        return Ok(None);
    }
    let series: Vec<(i64, f64, i64)> = sqlx::query_as(
        "select bucket, util_sum, samples from utilization_bucket
         where workload_id = $1 order by bucket",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let series: Vec<(i64, f64)> = series
        .into_iter()
        .filter(|(_, _, n)| *n > 0)
        .map(|(bucket, sum, n)| (bucket, sum / n as f64 / 100.0))
        .collect();
    let bucket_s = crate::agent::utilization::BUCKET_S;
    Ok(Some(app::workloads::Utilization {
        mean: sum / samples as f64 / 100.0,
        samples,
        idle_for_s: running
            .then(|| app::workloads::Utilization::idle_for(&series, now, bucket_s))
            .flatten(),
        simulated: measured == 0,
        series,
    }))
}

/// `(runs, run seconds, charged GPU-seconds)` of a workload up to `now`: a gang's runs on
/// several nodes count once in time and fully in GPU-seconds; only allocated runs are charged.
pub async fn run_totals(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    now: i64,
) -> Result<(i64, i64, i64), sqlx::Error> {
    sqlx::query_as(
        "select
            (select count(*) from (select distinct started_at from workload_run where workload_id = $1) as starts),
            (select cast(coalesce(sum(d), 0) as bigint) from
                (select distinct started_at, coalesce(ended_at, $2) - started_at as d
                 from workload_run where workload_id = $1) as runs),
            (select cast(coalesce(sum(gpus * (coalesce(ended_at, $2) - started_at)), 0) as bigint)
             from workload_run where workload_id = $1 and allocated <> 0)",
    )
    .bind(workload_id)
    .bind(now)
    .fetch_one(db)
    .await
}

/// When retention cleared the workload's output and deleted its older events, if it did.
pub async fn removed_at(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
) -> Result<(Option<i64>, Option<i64>), sqlx::Error> {
    sqlx::query_as(
        "select output_removed_at, events_removed_at from workload where workload_id = $1",
    )
    .bind(workload_id)
    .fetch_one(db)
    .await
}

pub async fn log_tail(db: impl AnyExecutor<'_>, workload_id: i64) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("select log_tail from workload where workload_id = $1")
        .bind(workload_id)
        .fetch_one(db)
        .await
}

/// Moves an active workload out of its run: back to `queued` (keeping its progress) or to an end
/// state (`succeeded`, `failed`, `cancelled`, `preempted`), banking the time of the current run.
pub async fn leave_run(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    state: WorkloadState,
    exit_code: Option<i32>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update workload set state = $2, exit_code = coalesce($3, exit_code),
                progress_s = progress_s + ($4 - coalesce(started_at, $4)),
                queued_at = case when $2 = 'queued' then $4 else queued_at end,
                ended_at = case when $2 = 'queued' then null else $4 end,
                started_at = null, protected_until = null
         where workload_id = $1 and state in ('queued', 'running')",
    )
    .bind(workload_id)
    .bind(state.as_str())
    .bind(exit_code)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

/// A live budget node by path: its id and whether it is a leaf (a project work may charge).
pub async fn project_node(
    db: impl AnyExecutor<'_>,
    path: &str,
) -> Result<Option<(i64, Flag)>, sqlx::Error> {
    sqlx::query_as(
        "select b.budget_node_id, not exists (select 1 from budget_node c where c.parent_id = b.budget_node_id
                                               and c.removed_at is null)
         from budget_node b where b.path = $1 and b.removed_at is null",
    )
    .bind(path)
    .fetch_optional(db)
    .await
}

/// The GPU count of every node whose agent has reported its GPUs.
/// Nodes that have reported GPUs: how many, the most GPUs on one, and the GPUs of all — in one
/// row, since every submission asks (a thousand rows each time slowed submissions down).
pub async fn connected_capacity(
    db: impl AnyExecutor<'_>,
    cluster_id: i64,
) -> Result<(i64, i64, i64), sqlx::Error> {
    let (nodes, largest, total): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
        "select count(*), max(gpu_count), cast(sum(gpu_count) as bigint) from node
         where gpu_count > 0 and cluster_id = $1",
    )
    .bind(cluster_id)
    .fetch_one(db)
    .await?;
    Ok((nodes, largest.unwrap_or(0), total.unwrap_or(0)))
}

/// A run on a node: its workload and when it ended, if it did.
pub async fn run_on_node(
    db: impl AnyExecutor<'_>,
    run_id: i64,
    node_id: i64,
) -> Result<Option<(i64, Option<i64>)>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, ended_at from workload_run where workload_run_id = $1 and node_id = $2",
    )
    .bind(run_id)
    .bind(node_id)
    .fetch_optional(db)
    .await
}

/// Whether the workload can resume, and the node's name.
pub async fn resumable_and_node(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    node_id: i64,
) -> Result<(bool, String), sqlx::Error> {
    let (resumable, node): (Flag, String) = sqlx::query_as(
        "select w.resumable, n.name from workload w, node n where w.workload_id = $1 and n.node_id = $2",
    )
    .bind(workload_id)
    .bind(node_id)
    .fetch_one(db)
    .await?;
    Ok((resumable.0, node))
}

pub async fn set_log_tail(
    db: impl AnyExecutor<'_>,
    workload_id: i64,
    log: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("update workload set log_tail = $2 where workload_id = $1")
        .bind(workload_id)
        .bind(log)
        .execute(db)
        .await?;
    Ok(())
}

/// How many workloads are in each state, as `(state, count)`.
pub async fn count_by_state(db: impl AnyExecutor<'_>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("select state, count(*) from workload group by state")
        .fetch_all(db)
        .await
}

/// `(cluster, leaf, run seconds)` of the workloads that succeeded since `since`, newest first,
/// at most `limit`: what a start projection guesses run times from (each cluster from its own). A
/// gang's runs on several nodes count once in time.
pub async fn recent_run_times(
    db: impl AnyExecutor<'_>,
    since: i64,
    limit: i64,
) -> Result<Vec<(i64, i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, cast(sum(d) as bigint) from (
            select distinct w.workload_id, w.cluster_id, w.budget_node_id, w.ended_at as done,
                r.started_at, r.ended_at - r.started_at as d
            from workload w join workload_run r on r.workload_id = w.workload_id
            where w.state = 'succeeded' and w.ended_at >= $1 and r.ended_at is not null
         ) as runs
         group by workload_id, cluster_id, budget_node_id, done
         order by done desc
         limit $2",
    )
    .bind(since)
    .bind(limit)
    .fetch_all(db)
    .await
}
