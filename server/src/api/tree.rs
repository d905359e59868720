//! `/api/v1/tree` and `/api/v1/nodes`.

use super::auth::ApiUser;
use crate::{
    budget::repo::{grants, Grant},
    nodes::{repo as node_repo, service as node_service},
    runtime::snapshot,
    users::service::now,
    AppState, ServerError,
};
use axum::{
    extract::{Path, State},
    Json,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Every tree node with its path, share, fraction of the cluster, owners and usage ratio.
pub async fn tree(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
) -> Result<Json<Value>, ServerError> {
    let now = now();
    let mut db = state.pool.acquire().await?;
    let Some(snap) = snapshot::load(&mut db, &state.runtime.config(), now).await? else {
        return Ok(Json(json!({ "nodes": [] })));
    };
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, user) in grants(&state.pool, Grant::Owner).await? {
        owners.entry(path).or_default().push(user);
    }
    let tree = &snap.tree.tree;
    let standings = snap.engine.standings(now);
    let shares = tree.version_at(now);
    let nodes: Vec<Value> = tree
        .ids()
        .map(|id| {
            let path = tree.path(id).to_string();
            json!({
                "path": path,
                "name": tree.name(id),
                "share": shares.share(id),
                "fraction": shares.fraction(id),
                "leaf": tree.is_leaf(id),
                "owners": owners.get(&path).cloned().unwrap_or_default(),
                "usage_gpu_h": standings.usage(id) / 3600.0,
                "allocated_gpu_h": standings.allocated(id) / 3600.0,
                "ratio": Some(standings.ratio(id)).filter(|r| r.is_finite()),
            })
        })
        .collect();
    Ok(Json(json!({ "nodes": nodes })))
}

pub async fn nodes(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
) -> Result<Json<Value>, ServerError> {
    let now = now();
    let rows = node_repo::list_nodes(&state.pool).await?;
    let nodes: Vec<Value> = rows
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "gpu_model": n.gpu_model,
                "gpus": n.gpu_count,
                "state": n.health(),
                "admin_state": n.admin_state,
                "last_heartbeat_at": n.last_heartbeat_at,
                "heartbeat_age_s": n.last_heartbeat_at.map(|t| now - t),
            })
        })
        .collect();
    Ok(Json(json!({ "nodes": nodes })))
}

/// `POST /api/v1/nodes/{name}/{cordon|drain|mark-unhealthy|uncordon}` (admin).
pub async fn node_action(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path((name, action)): Path<(String, String)>,
) -> Result<Json<Value>, ServerError> {
    if !user.is_admin() {
        return Err(ServerError::Forbidden(
            "Only administrators can change a node's state.".into(),
        ));
    }
    let node = node_service::set_admin_state(&state.pool, &name, &action).await?;
    tracing::info!(admin = %user.username, node = %name, %action, "node state changed");
    state.runtime.wake();
    Ok(Json(
        json!({ "name": node.name, "state": node.health(), "admin_state": node.admin_state }),
    ))
}
