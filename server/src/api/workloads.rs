//! `/api/v1/workloads`.

use super::{auth::ApiUser, body::ApiJson};
use crate::{
    workloads::{
        domain::{self, SubmitWorkload},
        repo, service,
    },
    AppState, ServerError,
};
use app::workloads::{WorkloadDetail, WorkloadView};
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    Json,
};
use serde::Deserialize;

pub async fn submit(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    ApiJson(input): ApiJson<SubmitWorkload>,
) -> Result<(StatusCode, Json<WorkloadView>), ServerError> {
    let workload = service::submit(&state.pool, &state.runtime, &user, input).await?;
    Ok((StatusCode::CREATED, Json(workload)))
}

#[derive(Deserialize)]
pub struct ListQuery {
    state: Option<String>,
    /// `mine=true`: only the caller's workloads.
    #[serde(default)]
    mine: bool,
    limit: Option<i64>,
    /// Only workloads on this cluster.
    cluster: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<WorkloadView>>, ServerError> {
    let filter = domain::state_filter(query.state.as_deref())?;
    let limit = query.limit.unwrap_or(500).clamp(1, 5000);
    let owner = query.mine.then_some(user.id);
    let cluster = service::cluster_filter(&state.pool, query.cluster.as_deref()).await?;
    Ok(Json(
        repo::list_workloads(
            &state.pool,
            owner,
            filter,
            cluster.map(|c| c.cluster_id),
            limit,
            state.runtime.now(),
        )
        .await?,
    ))
}

pub async fn detail(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<Json<WorkloadDetail>, ServerError> {
    Ok(Json(
        service::detail(&state.pool, &state.runtime, &user, id).await?,
    ))
}

pub async fn cancel(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<Json<WorkloadView>, ServerError> {
    Ok(Json(
        service::cancel(&state.pool, &state.runtime, &user, id).await?,
    ))
}

pub async fn log(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Path(id): Path<i64>,
) -> Result<String, ServerError> {
    service::get(&state.pool, id).await?;
    Ok(repo::log_tail(&state.pool, id).await?)
}
