//! `/api/v1/change-requests`: the governance flow for scripts, with the same rules as the pages.

use super::{auth::ApiUser, body::ApiJson};
use crate::{
    budget::changes::{self, Proposal},
    AppState, ServerError,
};
use app::budget::{ChangeRequestView, ChangeState};
use axum::{
    body::Bytes,
    extract::{Path, Query, State},
    http::StatusCode,
    Json,
};
use serde::Deserialize;

pub async fn propose(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    ApiJson(proposal): ApiJson<Proposal>,
) -> Result<(StatusCode, Json<ChangeRequestView>), ServerError> {
    Ok((
        StatusCode::CREATED,
        Json(changes::propose(&state.pool, &user, proposal, state.runtime.now()).await?),
    ))
}

#[derive(Deserialize)]
pub struct ListQuery {
    state: Option<String>,
    node: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<ChangeRequestView>>, ServerError> {
    let filter = match query.state.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(name.parse::<ChangeState>().map_err(|_| {
            let names: Vec<&str> = ChangeState::ALL.iter().map(|s| s.as_str()).collect();
            ServerError::invalid(
                "state",
                format!("Unknown state \"{name}\": use one of {}.", names.join(", ")),
            )
        })?),
    };
    Ok(Json(
        changes::list(&state.pool, &user, filter, query.node.as_deref()).await?,
    ))
}

pub async fn get(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<Json<ChangeRequestView>, ServerError> {
    Ok(Json(changes::get(&state.pool, &user, id).await?))
}

#[derive(Deserialize, Default)]
struct Decision {
    #[serde(default)]
    comment: String,
}

/// The optional `{"comment": "…"}` body of a decision.
fn comment(body: &[u8]) -> Result<String, ServerError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(String::new());
    }
    serde_json::from_slice::<Decision>(body)
        .map(|d| d.comment)
        .map_err(|e| ServerError::invalid("comment", format!("The request body is not valid: {e}")))
}

pub async fn approve(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<Json<ChangeRequestView>, ServerError> {
    let comment = comment(&body)?;
    let decided =
        changes::decide(&state.pool, &user, id, true, &comment, state.runtime.now()).await?;
    state.runtime.wake();
    Ok(Json(decided))
}

pub async fn reject(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<Json<ChangeRequestView>, ServerError> {
    let comment = comment(&body)?;
    Ok(Json(
        changes::decide(&state.pool, &user, id, false, &comment, state.runtime.now()).await?,
    ))
}

/// `POST /api/v1/change-requests/{id}/withdraw`: the proposer takes a waiting request back.
pub async fn withdraw(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<Json<ChangeRequestView>, ServerError> {
    Ok(Json(
        changes::withdraw(&state.pool, &user, id, state.runtime.now()).await?,
    ))
}

/// `POST /api/v1/change-requests/{id}/rebase`: a stale request proposed again on today's shares;
/// answers with the new request (201).
pub async fn rebase(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<(StatusCode, Json<ChangeRequestView>), ServerError> {
    Ok((
        StatusCode::CREATED,
        Json(changes::rebase(&state.pool, &user, id, state.runtime.now()).await?),
    ))
}

pub async fn impact(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Path(id): Path<i64>,
) -> Result<Json<app::budget::ImpactView>, ServerError> {
    Ok(Json(
        crate::budget::impact::impact(&state.pool, &user, id, state.runtime.now()).await?,
    ))
}
