//! SQL for the agent API: the node's runs as the hand-out sees them, and output cursors.

use super::{handout::NodeRun, protocol::Assignment};
use crate::runtime::snapshot::parse_indices;
use app::workloads::WorkloadState;
use sqlx::{AnyConnection, AnyExecutor, FromRow};
use std::collections::BTreeMap;

#[derive(Debug, Clone, FromRow)]
pub struct RunRow {
    pub run_id: i64,
    pub workload_id: i64,
    pub name: String,
    pub command: String,
    pub gpu_indices: String,
    pub run_count: i64,
    pub sent_answer: Option<i64>,
    pub ended_at: Option<i64>,
    #[sqlx(try_from = "String")]
    pub state: WorkloadState,
}

impl RunRow {
    pub fn node_run(&self) -> NodeRun {
        NodeRun {
            run_id: self.run_id,
            gpus: parse_indices(&self.gpu_indices),
            sent_answer: self.sent_answer,
            live: self.ended_at.is_none() && self.state == WorkloadState::Running,
        }
    }

    pub fn assignment(&self) -> Assignment {
        Assignment {
            run_id: self.run_id,
            workload_id: self.workload_id,
            name: self.name.clone(),
            command: self.command.clone(),
            gpu_indices: parse_indices(&self.gpu_indices),
            resumed: self.run_count > 1,
        }
    }
}

/// The node's open runs and its ended runs not yet known to be gone.
pub async fn node_runs(db: impl AnyExecutor<'_>, node_id: i64) -> Result<Vec<RunRow>, sqlx::Error> {
    sqlx::query_as(
        "select r.workload_run_id as run_id, w.workload_id, w.name, w.command, r.gpu_indices, w.run_count,
                r.sent_answer, r.ended_at, w.state
         from workload_run r join workload w on w.workload_id = r.workload_id
         where r.node_id = $1 and (r.ended_at is null or (r.released_at is null and r.sent_answer is not null))
         order by r.workload_run_id",
    )
    .bind(node_id)
    .fetch_all(db)
    .await
}

/// Numbers an answer that hands out runs, unless a later sync of the node (a greater `sync`
/// number, see `nodes::heartbeats`) has handed out runs already: a held sync the agent gave up on
/// must not number an answer after the one the agent acted on.
pub async fn next_answer(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    sync: i64,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "update node set answers_sent = answers_sent + 1, syncs = $2
         where node_id = $1 and syncs <= $2
         returning answers_sent",
    )
    .bind(node_id)
    .bind(sync)
    .fetch_optional(db)
    .await
}

pub async fn mark_sent(
    db: &mut AnyConnection,
    run_ids: &[i64],
    answer: i64,
) -> Result<(), sqlx::Error> {
    for run_id in run_ids {
        sqlx::query("update workload_run set sent_answer = $2 where workload_run_id = $1")
            .bind(run_id)
            .bind(answer)
            .execute(&mut *db)
            .await?;
    }
    Ok(())
}

/// Records that a run's processes are gone (its GPUs may go to another run).
pub async fn release(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    run_id: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update workload_run set released_at = $3
         where workload_run_id = $1 and node_id = $2 and released_at is null",
    )
    .bind(run_id)
    .bind(node_id)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

/// The run's workload and how much of its output has arrived.
pub async fn output_cursor(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    run_id: i64,
) -> Result<Option<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "select workload_id, log_received from workload_run where workload_run_id = $1 and node_id = $2",
    )
    .bind(run_id)
    .bind(node_id)
    .fetch_optional(db)
    .await
}

pub async fn set_output_cursor(
    db: impl AnyExecutor<'_>,
    run_id: i64,
    received: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("update workload_run set log_received = $2 where workload_run_id = $1")
        .bind(run_id)
        .bind(received)
        .execute(db)
        .await?;
    Ok(())
}

/// Output received so far for each of `run_ids` on the node.
pub async fn output_received(
    db: &mut AnyConnection,
    node_id: i64,
    run_ids: impl IntoIterator<Item = i64>,
) -> Result<BTreeMap<i64, u64>, sqlx::Error> {
    // One statement per few hundred runs, not one per run: every agent sync asks.
    let ids: Vec<i64> = run_ids.into_iter().collect();
    let mut received = BTreeMap::new();
    for chunk in ids.chunks(crate::db::ID_CHUNK) {
        let rows: Vec<(i64, i64)> = sqlx::query_as(&format!(
            "select workload_run_id, log_received from workload_run
             where node_id = $1 and workload_run_id in ({})",
            crate::db::id_list(chunk)
        ))
        .bind(node_id)
        .fetch_all(&mut *db)
        .await?;
        received.extend(rows.into_iter().map(|(run, at)| (run, at.max(0) as u64)));
    }
    Ok(received)
}
