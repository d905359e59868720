//! `/api/agent/v1`: what agents call, authenticated by their node token.

use super::protocol::{Assignment, SyncRequest, SyncResponse};
use crate::{
    nodes::{repo as node_repo, repo::NodeRow, service as node_service},
    runtime::snapshot::parse_indices,
    users::service::now,
    workloads::service as workload_service,
    AppState, ServerError,
};
use axum::{
    extract::{FromRequestParts, State},
    http::{header::AUTHORIZATION, request::Parts},
    routing::post,
    Json, Router,
};
use std::{collections::BTreeSet, time::Duration};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/agent/v1/sync", post(sync))
}

/// The node whose token is in `Authorization: Bearer …`.
pub struct AgentNode(pub NodeRow);

impl FromRequestParts<AppState> for AgentNode {
    type Rejection = ServerError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts).ok_or(ServerError::Unauthenticated)?;
        node_service::authenticate(&state.pool, token)
            .await?
            .map(AgentNode)
            .ok_or(ServerError::Unauthenticated)
    }
}

pub fn bearer(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

async fn sync(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    Json(request): Json<SyncRequest>,
) -> Result<Json<SyncResponse>, ServerError> {
    if let Some(name) = request.name.as_deref() {
        if name != node.name {
            return Err(ServerError::conflict(
                "name",
                format!(
                    "This token belongs to node \"{}\", not \"{name}\".",
                    node.name
                ),
            ));
        }
    }
    if request.gpus == 0 || request.gpus > 64 {
        return Err(ServerError::invalid("gpus", "A node reports 1 to 64 GPUs."));
    }
    let runtime = &state.runtime;
    let now = now();
    let changed = node.down_since.is_some()
        || node.last_heartbeat_at.is_none()
        || node.gpu_count != i64::from(request.gpus)
        || node.agent_healthy != request.healthy;
    node_repo::record_heartbeat(
        &state.pool,
        node.node_id,
        i64::from(request.gpus),
        &request.gpu_model,
        request.healthy,
        now,
    )
    .await?;
    let woke = changed;
    let mut ended = false;
    for finished in &request.finished {
        ended |= workload_service::finished(
            &state.pool,
            node.node_id,
            finished.run_id,
            finished.exit_code,
            &finished.log_tail,
            now,
        )
        .await?;
    }
    if !request.logs.is_empty() {
        let mut db = state.pool.acquire().await?;
        for log in &request.logs {
            let workload: Option<i64> = sqlx::query_scalar(
                "select workload_id from workload_run where workload_run_id = $1 and node_id = $2",
            )
            .bind(log.run_id)
            .bind(node.node_id)
            .fetch_optional(&mut *db)
            .await?;
            if let Some(workload_id) = workload {
                workload_service::store_log(&mut db, workload_id, &log.tail).await?;
            }
        }
    }
    if ended {
        runtime.announce();
    }
    if woke || ended {
        runtime.wake();
    }

    let mut assignments = runtime.assignments();
    let reported: BTreeSet<i64> = request.running.iter().copied().collect();
    // Never hold a sync past the heartbeat interval, or the node would look silent.
    let heartbeat_s = (runtime.config().heartbeat_deadline / 3).max(1);
    let hold = request.wait_s.min(heartbeat_s as u64);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(hold);
    loop {
        assignments.borrow_and_update();
        let (start, stop) = difference(&state, node.node_id, &reported).await?;
        if !start.is_empty() || !stop.is_empty() || tokio::time::Instant::now() >= deadline {
            let config = runtime.config();
            return Ok(Json(SyncResponse {
                node: node.name.clone(),
                start,
                stop,
                grace_s: config.grace,
                heartbeat_s,
            }));
        }
        if tokio::time::timeout_at(deadline, assignments.changed())
            .await
            .is_err()
        {
            continue;
        }
    }
}

/// What the node should start (open runs it does not report) and stop (reported runs that are no
/// longer open).
async fn difference(
    state: &AppState,
    node_id: i64,
    reported: &BTreeSet<i64>,
) -> Result<(Vec<Assignment>, Vec<i64>), ServerError> {
    let open: Vec<(i64, i64, String, String, String, i64)> = sqlx::query_as(
        "select r.workload_run_id, w.workload_id, w.name, w.command, r.gpu_indices, w.run_count
         from workload_run r join workload w on w.workload_id = r.workload_id
         where r.node_id = $1 and r.ended_at is null and w.state = 'running' order by r.workload_run_id",
    )
    .bind(node_id)
    .fetch_all(&state.pool)
    .await?;
    let open_ids: BTreeSet<i64> = open.iter().map(|r| r.0).collect();
    let start = open
        .into_iter()
        .filter(|r| !reported.contains(&r.0))
        .map(
            |(run_id, workload_id, name, command, gpus, run_count)| Assignment {
                run_id,
                workload_id,
                name,
                command,
                gpu_indices: parse_indices(&gpus),
                resumed: run_count > 1,
            },
        )
        .collect();
    let stop = reported
        .iter()
        .copied()
        .filter(|id| !open_ids.contains(id))
        .collect();
    Ok((start, stop))
}
