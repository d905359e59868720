//! Node operations shared by the CLI, the agent API and the JSON API.

use super::repo::{self, NodeRow};
use crate::{
    runtime::{snapshot::parse_indices, Runtime},
    secrets, ServerError,
};
use app::{
    model::CurrentUser,
    nodes::{GpuHolder, GpuSlot, NodeAction, NodeHealth, NodeView},
};
use sqlx::AnyPool;
use std::collections::BTreeMap;

/// Registers a node in `cluster` (created if new; `None` is the default cluster) and returns it
/// with its token (shown once; only the hash is kept).
pub async fn register_node(
    pool: &AnyPool,
    name: &str,
    cluster: Option<&str>,
    now: i64,
) -> Result<(NodeRow, String), ServerError> {
    let name = parse_node_name(name)?;
    let cluster = cluster
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or(crate::clusters::DEFAULT);
    let (token, hash) = secrets::generate("hgn_");
    let mut tx = crate::db::begin_write(pool).await?;
    let cluster = crate::clusters::ensure(&mut tx, cluster, now).await?;
    match repo::insert_node(&mut tx, &name, cluster.cluster_id, &hash, now).await {
        Ok(node) => {
            tx.commit().await?;
            Ok((node, token))
        }
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(ServerError::conflict(
            "name",
            format!("A node named \"{name}\" is already registered."),
        )),
        Err(error) => Err(error.into()),
    }
}

/// An admin registers a node from the Nodes page; returns it and its agent token (shown once).
pub async fn register_by(
    pool: &AnyPool,
    actor: &CurrentUser,
    name: &str,
    cluster: Option<&str>,
    now: i64,
) -> Result<(NodeRow, String), ServerError> {
    if !actor.is_admin() {
        return Err(ServerError::Forbidden(
            "Only administrators can register nodes.".into(),
        ));
    }
    let (node, token) = register_node(pool, name, cluster, now).await?;
    tracing::info!(admin = %actor.username, node = %node.name, "node registered");
    Ok((node, token))
}

/// The node a bearer token belongs to.
pub async fn authenticate(pool: &AnyPool, token: &str) -> Result<Option<NodeRow>, ServerError> {
    Ok(repo::find_node_by_token(pool, &secrets::hash(token)).await?)
}

/// Reads an admin action as typed in a URL, form or command line.
pub fn parse_action(raw: &str) -> Result<NodeAction, ServerError> {
    raw.trim().parse().map_err(|_| {
        ServerError::invalid(
            "action",
            format!(
                "Unknown node action \"{}\": use cordon, drain, mark-unhealthy or uncordon.",
                raw.trim()
            ),
        )
    })
}

/// Admin actions: cordon (no new work, drain at min runtime), drain (same, said plainly), mark
/// unhealthy, uncordon (back to healthy).
pub async fn set_admin_state(
    pool: &AnyPool,
    name: &str,
    action: NodeAction,
) -> Result<NodeRow, ServerError> {
    let state = action.admin_state();
    let node = repo::find_node_by_name(pool, name)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no node named \"{name}\".")))?;
    repo::set_admin_state(pool, node.node_id, state).await?;
    if state == NodeHealth::Healthy {
        // An admin returning a node to service also clears its agent's last failed check; if the
        // check still fails, the agent's next report takes the node out again.
        repo::set_agent_health(pool, node.node_id, None).await?;
    }
    Ok(repo::find_node_by_name(pool, name).await?.unwrap_or(node))
}

/// An admin's action from the pages or the JSON API: checked, applied, logged, and the
/// scheduler woken to drain or refill the node.
pub async fn act(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    name: &str,
    action: &str,
) -> Result<NodeRow, ServerError> {
    if !actor.is_admin() {
        return Err(ServerError::Forbidden(
            "Only administrators can change a node's state.".into(),
        ));
    }
    let action = parse_action(action)?;
    let node = set_admin_state(pool, name, action).await?;
    tracing::info!(admin = %actor.username, node = %name, action = action.as_str(), "node state changed");
    runtime.wake();
    Ok(node)
}

/// An admin removes a node registered by mistake: only one whose agent never connected (a node
/// that ran work keeps its history; cordon it instead). Its token stops working.
pub async fn remove_by(pool: &AnyPool, actor: &CurrentUser, name: &str) -> Result<(), ServerError> {
    if !actor.is_admin() {
        return Err(ServerError::Forbidden(
            "Only administrators can remove nodes.".into(),
        ));
    }
    let node = repo::find_node_by_name(pool, name)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("No node is named \"{name}\".")))?;
    if !repo::delete_unused_node(pool, node.node_id).await? {
        return Err(ServerError::conflict(
            "name",
            format!(
                "Node \"{name}\" has connected, so its history stays: cordon it to take it out of service."
            ),
        ));
    }
    tracing::info!(admin = %actor.username, node = %name, "node removed");
    Ok(())
}

/// Every node with its health, heartbeat age and what holds each GPU, at `now`.
pub async fn views(pool: &AnyPool, now: i64) -> Result<Vec<NodeView>, ServerError> {
    let rows = repo::list_nodes(pool).await?;
    let mut holders: BTreeMap<(i64, u32), GpuHolder> = BTreeMap::new();
    for run in repo::held_gpus(pool).await? {
        for index in parse_indices(&run.gpu_indices) {
            holders.insert(
                (run.node_id, index),
                GpuHolder {
                    workload_id: run.workload_id,
                    name: run.name.clone(),
                    project: run.project.clone(),
                    protected_until: run.protected_until,
                    allocated: run.allocated,
                    owner: run.owner.clone(),
                },
            );
        }
    }
    Ok(rows
        .into_iter()
        .map(|n| {
            let slots: Vec<GpuSlot> = (0..n.gpu_count.max(0) as u32)
                .map(|index| GpuSlot {
                    index,
                    holder: holders.get(&(n.node_id, index)).cloned(),
                })
                .collect();
            let state = n.health();
            NodeView {
                draining: NodeView::drain_status(state, &slots, now),
                slots,
                state,
                heartbeat_age_s: n.last_heartbeat_at.map(|t| now - t),
                health_reason: n.health_reason,
                unhealthy_since: n.unhealthy_since,
                name: n.name,
                cluster: n.cluster,
                gpu_model: n.gpu_model,
                gpus: n.gpu_count,
            }
        })
        .collect())
}

fn parse_node_name(raw: &str) -> Result<String, ServerError> {
    let name = raw.trim();
    if name.is_empty() || name.len() > 64 {
        return Err(ServerError::invalid(
            "name",
            "A node name has 1 to 64 characters.",
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ServerError::invalid(
            "name",
            format!("A node name may use letters, digits, '.', '_' and '-', not '{bad}'."),
        ));
    }
    Ok(name.to_string())
}
