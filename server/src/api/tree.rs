//! `/api/v1/tree` and `/api/v1/nodes`.

use super::auth::ApiUser;
use crate::{
    nodes::{repo as node_repo, service as node_service},
    AppState, ServerError,
};
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    Json,
};
use serde_json::{json, Value};

/// Every tree node with its path, share, fraction of the cluster, owners and usage ratio on one
/// cluster (`?cluster=`; the first with nodes by default).
///
/// Every tree node with its path, share, fraction of the cluster, owners and usage ratio.
pub async fn tree(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(query): Query<NodesQuery>,
) -> Result<Json<Value>, ServerError> {
    let cluster = query.cluster.as_deref();
    let nodes =
        crate::budget::view::tree_view_of(&state.pool, &state.runtime, &user, cluster).await?;
    Ok(Json(json!({ "nodes": nodes })))
}

#[derive(serde::Deserialize)]
pub struct NodesQuery {
    /// Only nodes of this cluster.
    cluster: Option<String>,
}

pub async fn nodes(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(query): Query<NodesQuery>,
) -> Result<Json<Value>, ServerError> {
    let now = state.runtime.now();
    let cluster =
        crate::workloads::service::cluster_filter(&state.pool, query.cluster.as_deref()).await?;
    let rows = node_repo::list_nodes(&state.pool).await?;
    let nodes: Vec<Value> = rows
        .iter()
        .filter(|n| {
            cluster
                .as_ref()
                .is_none_or(|c| c.cluster_id == n.cluster_id)
        })
        .map(|n| {
            json!({
                "name": n.name,
                "cluster": n.cluster,
                "gpu_model": n.gpu_model,
                "gpus": n.gpu_count,
                "state": n.health(),
                "admin_state": n.admin_state,
                "last_heartbeat_at": n.last_heartbeat_at,
                "heartbeat_age_s": n.last_heartbeat_at.map(|t| now - t),
                "health_reason": n.health_reason,
                "unhealthy_since": n.unhealthy_since,
            })
        })
        .collect();
    Ok(Json(json!({ "nodes": nodes })))
}

/// `GET /api/v1/clusters`: every cluster with registered nodes (the default one while there are
/// none), with its nodes, GPUs and the GPUs that take work now.
pub async fn clusters(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
) -> Result<Json<Value>, ServerError> {
    let mut db = state.pool.acquire().await?;
    let clusters = crate::clusters::in_use(&mut db).await?;
    Ok(Json(json!({ "clusters": clusters })))
}

/// `POST /api/v1/nodes/{name}/{cordon|drain|mark-unhealthy|uncordon}` (admin).
pub async fn node_action(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path((name, action)): Path<(String, String)>,
) -> Result<Json<Value>, ServerError> {
    let node = node_service::act(&state.pool, &state.runtime, &user, &name, &action).await?;
    Ok(Json(
        json!({ "name": node.name, "state": node.health(), "admin_state": node.admin_state }),
    ))
}

/// `DELETE /api/v1/nodes/{name}`: removes a node that never connected (admins).
pub async fn remove_node(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(name): Path<String>,
) -> Result<StatusCode, ServerError> {
    node_service::remove_by(&state.pool, &user, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
