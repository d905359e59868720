//! `/api/agent/v1`: what agents call, authenticated by their node token.

use super::{
    handout::{self, Plan},
    output,
    protocol::{SyncRequest, SyncResponse, REASON_CHARS, SYNC_BODY_LIMIT},
    repo as agent_repo,
};
use crate::runtime::SyncTiming;
use crate::{
    nodes::{heartbeats, repo as node_repo, repo::NodeRow, service as node_service},
    workloads::service as workload_service,
    AppState, ServerError,
};
use axum::{
    body::Body,
    extract::{DefaultBodyLimit, FromRequestParts, State},
    http::{header::AUTHORIZATION, request::Parts},
    routing::post,
    Json, Router,
};
use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

pub fn routes() -> Router<AppState> {
    // The body is read by the handler itself, after the heartbeat is recorded, with its own limit.
    Router::new()
        .route("/api/agent/v1/sync", post(sync))
        .layer(DefaultBodyLimit::disable())
}

/// The node whose token is in `Authorization: Bearer …`, and how long finding it took.
pub struct AgentNode(pub NodeRow, pub Duration);

impl FromRequestParts<AppState> for AgentNode {
    type Rejection = ServerError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let began = Instant::now();
        let token = bearer(parts).ok_or(ServerError::Unauthenticated)?;
        node_service::authenticate(&state.control_pool, token)
            .await?
            .map(|node| AgentNode(node, began.elapsed()))
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
    AgentNode(node, auth): AgentNode,
    body: Body,
) -> Result<Json<SyncResponse>, ServerError> {
    let mut timing = SyncTiming {
        auth,
        ..SyncTiming::default()
    };
    let mut lap = Instant::now();
    let now = state.runtime.now();
    // The agent spoke: whatever its report holds, the node is alive (written now where that
    // matters to anyone, in the next batch otherwise).
    let heartbeats = state.runtime.heartbeats();
    let sync_number = heartbeats.sync_number();
    let deadline = state.runtime.config().heartbeat_deadline;
    if heartbeats::write_at_once(
        node.down_since.is_some(),
        node.last_heartbeat_at,
        now,
        deadline,
    ) {
        node_repo::touch_heartbeat(&state.control_pool, node.node_id, now).await?;
    } else {
        heartbeats.note(&state.control_pool, node.node_id, now);
    }
    let request = read_request(body).await?;
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
    if let Some(cluster) = request.cluster.as_deref() {
        if cluster != node.cluster {
            return Err(ServerError::conflict(
                "cluster",
                format!(
                    "Node \"{}\" is registered in cluster \"{}\", not \"{cluster}\": start its agent with --cluster {} or register it again in \"{cluster}\".",
                    node.name, node.cluster, node.cluster
                ),
            ));
        }
    }
    if request.gpus == 0 || request.gpus > 64 {
        return Err(ServerError::invalid("gpus", "A node reports 1 to 64 GPUs."));
    }
    let runtime = &state.runtime;
    let mut woke = node.down_since.is_some()
        || node.last_heartbeat_at.is_none()
        || node.gpu_count != i64::from(request.gpus);
    if node.gpu_count != i64::from(request.gpus) || node.gpu_model != request.gpu_model {
        node_repo::record_gpus(
            &state.control_pool,
            node.node_id,
            i64::from(request.gpus),
            &request.gpu_model,
        )
        .await?;
    }
    let health_changed = record_health(&state, &node, &request, now).await?;
    if health_changed {
        runtime.announce();
    }
    woke |= health_changed;

    store_output(&state, node.node_id, &request).await?;
    super::utilization::record(&state.control_pool, node.node_id, &request.samples, now).await?;
    // Subscribed before this node's runs are read: a decision committed from here on wakes the
    // held sync below.
    let mut assignments = runtime.assignments();
    let mut seen = *assignments.borrow_and_update();
    // The nodes whose runs ended here (all of a multi-node workload's), then whose to tell.
    let mut ended: BTreeSet<i64> = BTreeSet::new();
    for finished in &request.finished {
        ended.extend(
            workload_service::finished(
                &state.control_pool,
                runtime,
                node.node_id,
                finished.run_id,
                finished.exit_code,
                finished.note.as_deref(),
                finished.by_agent,
                now,
            )
            .await?,
        );
    }
    let running: BTreeSet<i64> = request.running.iter().copied().collect();
    timing.report += lap.elapsed();
    lap = Instant::now();
    let first = plan(&state, node.node_id, &running, request.last_answer).await?;
    timing.plan += lap.elapsed();
    lap = Instant::now();
    for &run_id in &first.release {
        agent_repo::release(&state.control_pool, node.node_id, run_id, now).await?;
    }
    for &run_id in &first.lost {
        tracing::warn!(node = %node.name, run_id, "the agent has no record of a run it was given");
        ended.extend(workload_service::finished(
            &state.control_pool,
            runtime,
            node.node_id,
            run_id,
            None,
            Some("The node's agent has no record of this run (its state was lost), so how it ended is unknown."),
            false,
            now,
        )
        .await?);
    }
    let runs_ended = !ended.is_empty();
    if !first.release.is_empty() {
        // Released GPUs may let runs held for them start here: this node is concerned too.
        ended.insert(node.node_id);
    }
    if !ended.is_empty() {
        runtime.announce_nodes(ended);
    }
    if woke {
        runtime.wake();
    } else if runs_ended {
        runtime.wake_for_workloads();
    }
    timing.report += lap.elapsed();

    // Never hold a sync past the heartbeat interval, or the node would look silent.
    let heartbeat_s = (runtime.config().heartbeat_deadline / 3).max(1);
    let holding = tokio::time::Instant::now();
    let deadline = holding
        + hold_for(
            request.wait_s,
            heartbeat_s as u64,
            node.node_id,
            sync_number,
        );
    let mut plan_now = first;
    loop {
        if !plan_now.start.is_empty()
            || !plan_now.stop.is_empty()
            || tokio::time::Instant::now() >= deadline
        {
            let held = holding.elapsed();
            return answer(
                &state,
                &node,
                sync_number,
                &request,
                plan_now,
                heartbeat_s,
                held,
                timing,
            )
            .await;
        }
        tokio::select! {
            _ = tokio::time::timeout_at(deadline, assignments.changed()) => {}
            // A stopping server answers held syncs at once.
            _ = state.runtime.stopped() => {
                let held = holding.elapsed();
                return answer(&state, &node, sync_number, &request, plan_now, heartbeat_s, held, timing).await;
            }
        }
        let latest = *assignments.borrow_and_update();
        // Submissions and other nodes' changes announce too; only this node's need a new plan.
        if runtime.node_changed_since(node.node_id, seen) {
            let replanning = Instant::now();
            plan_now = plan(&state, node.node_id, &running, request.last_answer).await?;
            timing.plan += replanning.elapsed();
        }
        seen = latest;
    }
}

/// How long a sync that found nothing to do waits for work: what the agent asked (`wait_s`, until
/// its next run ends), but at most the heartbeat interval less up to a quarter of it, picked per
/// node and sync. Agents that began holding together (after a restart, or all woken by one
/// announcement) would otherwise all come back in the same instant at every heartbeat, each with
/// a write, and wait on each other: with 1,024 agents on SQLite, every sync of such a burst took
/// over a second (`hourglass loadtest`); spread, they drift apart within a few heartbeats.
fn hold_for(wait_s: u64, heartbeat_s: u64, node_id: i64, sync_number: i64) -> Duration {
    let full = Duration::from_secs(heartbeat_s);
    let asked = Duration::from_secs(wait_s);
    if asked < full * 3 / 4 {
        return asked;
    }
    // Hashed, so that neighbouring nodes and syncs land far apart.
    let z = std::hash::BuildHasher::hash_one(
        &std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default(),
        (node_id, sync_number),
    );
    let less = (full / 4).mul_f64((z >> 11) as f64 / (1u64 << 53) as f64);
    asked.min(full - less)
}

async fn read_request(body: Body) -> Result<SyncRequest, ServerError> {
    let bytes = axum::body::to_bytes(body, SYNC_BODY_LIMIT)
        .await
        .map_err(|_| {
            ServerError::TooLarge(format!(
                "A sync report is at most {} MiB; this one is larger or was cut off. The agent sends output in bounded chunks, so an agent from an older release may need upgrading.",
                SYNC_BODY_LIMIT >> 20
            ))
        })?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ServerError::invalid(
            "body",
            format!("The sync report is not valid JSON for this API version: {error}"),
        )
    })
}

/// Applies the agent's health report. An unhealthy report takes the node out of service with its
/// reason; a healthy one brings it back only where the operator allows it (Settings).
async fn record_health(
    state: &AppState,
    node: &NodeRow,
    request: &SyncRequest,
    now: i64,
) -> Result<bool, ServerError> {
    if !request.healthy {
        let reason: String = request
            .health_reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .unwrap_or("the agent reported the node unhealthy")
            .chars()
            .take(REASON_CHARS)
            .collect();
        if node.agent_healthy || node.health_reason.as_deref() != Some(reason.as_str()) {
            if node.agent_healthy {
                tracing::warn!(node = %node.name, %reason, "node reported unhealthy; draining it");
            }
            let since = node
                .unhealthy_since
                .filter(|_| !node.agent_healthy)
                .unwrap_or(now);
            node_repo::set_agent_health(&state.control_pool, node.node_id, Some((&reason, since)))
                .await?;
            if !node.agent_healthy {
                // Only the reason changed: the next pass reads it (drains name it), nobody else.
                state.runtime.wake();
            }
            return Ok(node.agent_healthy);
        }
        return Ok(false);
    }
    if !node.agent_healthy && crate::settings::auto_recover_nodes(&state.control_pool).await? {
        tracing::info!(node = %node.name, "node reported healthy again; back in service");
        node_repo::set_agent_health(&state.control_pool, node.node_id, None).await?;
        return Ok(true);
    }
    Ok(false)
}

/// Appends the report's output chunks to their workloads' logs, once each byte.
async fn store_output(
    state: &AppState,
    node_id: i64,
    request: &SyncRequest,
) -> Result<(), ServerError> {
    if request.output.iter().all(|chunk| chunk.len == 0) {
        return Ok(());
    }
    let mut tx = crate::db::begin_write(&state.control_pool).await?;
    for chunk in &request.output {
        let Some((workload_id, received)) =
            agent_repo::output_cursor(&mut *tx, node_id, chunk.run_id).await?
        else {
            continue;
        };
        if let Some((text, end)) = output::accept(received.max(0) as u64, chunk) {
            workload_service::append_output(&mut tx, workload_id, &text).await?;
            agent_repo::set_output_cursor(&mut *tx, chunk.run_id, end as i64).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

async fn plan(
    state: &AppState,
    node_id: i64,
    running: &BTreeSet<i64>,
    last_answer: i64,
) -> Result<Plan, ServerError> {
    let runs = agent_repo::node_runs(&state.control_pool, node_id).await?;
    let node_runs: Vec<_> = runs.iter().map(|r| r.node_run()).collect();
    Ok(handout::plan(&node_runs, running, last_answer))
}

/// The answer: runs to stop, and runs to start numbered with a new answer (only while this is
/// the node's newest sync; an older one that is still held answers without starts). The sync's
/// timing is recorded once answered.
#[allow(clippy::too_many_arguments)]
async fn answer(
    state: &AppState,
    node: &NodeRow,
    sync_number: i64,
    request: &SyncRequest,
    plan: Plan,
    heartbeat_s: i64,
    held: Duration,
    mut timing: SyncTiming,
) -> Result<Json<SyncResponse>, ServerError> {
    let config = state.runtime.config();
    let mut answer = 0;
    let mut start = Vec::new();
    let mut lap = Instant::now();
    if !plan.start.is_empty() {
        let mut tx = crate::db::begin_write(&state.control_pool).await?;
        timing.answer_lock = lap.elapsed();
        lap = Instant::now();
        if let Some(number) = agent_repo::next_answer(&mut *tx, node.node_id, sync_number).await? {
            let runs = agent_repo::node_runs(&mut *tx, node.node_id).await?;
            start = runs
                .iter()
                .filter(|r| plan.start.contains(&r.run_id) && r.node_run().live)
                .map(|r| r.assignment())
                .collect();
            let ids: Vec<i64> = start.iter().map(|a| a.run_id).collect();
            agent_repo::mark_sent(&mut tx, &ids, number).await?;
            answer = number;
        }
        tx.commit().await?;
    }
    let reported: BTreeSet<i64> = request
        .running
        .iter()
        .copied()
        .chain(request.finished.iter().map(|f| f.run_id))
        .chain(request.output.iter().map(|c| c.run_id))
        .collect();
    let output_received = match reported.is_empty() {
        true => Default::default(),
        false => {
            let mut db = state.control_pool.acquire().await?;
            agent_repo::output_received(&mut db, node.node_id, reported).await?
        }
    };
    timing.answer = lap.elapsed();
    state.runtime.record_sync(timing);
    Ok(Json(SyncResponse {
        node: node.name.clone(),
        node_key: node.node_key(),
        answer,
        start,
        stop: plan.stop,
        grace_s: config.grace,
        heartbeat_s,
        down_after_s: config.heartbeat_deadline,
        output_received,
        held_ms: held.as_millis() as u64,
    }))
}

#[cfg(test)]
mod tests {
    use super::hold_for;
    use std::time::Duration;

    #[test]
    fn held_syncs_end_in_the_heartbeats_last_quarter_spread_across_nodes_and_syncs() {
        let heartbeat = Duration::from_secs(15);
        // An agent whose next run ends sooner is answered when it asked.
        assert_eq!(hold_for(5, 15, 1, 1), Duration::from_secs(5));
        let holds: Vec<Duration> = (0..1024).map(|node| hold_for(20, 15, node, 7)).collect();
        assert!(holds
            .iter()
            .all(|&h| h >= heartbeat * 3 / 4 && h <= heartbeat));
        let (low, high) = (holds.iter().min().unwrap(), holds.iter().max().unwrap());
        assert!(
            *high - *low > Duration::from_secs(3),
            "a thousand nodes spread over most of the quarter: {low:?} – {high:?}"
        );
        // The same node comes back at another point of the quarter on its next sync.
        assert_ne!(hold_for(20, 15, 3, 1), hold_for(20, 15, 3, 2));
        // Never longer than the agent asked for.
        assert!(hold_for(12, 15, 9, 9) <= Duration::from_secs(12));
    }
}
