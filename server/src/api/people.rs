//! `/api/v1/tree/members` and `/api/v1/tree/owners`: who belongs to a tree node.

use super::auth::ApiUser;
use crate::{budget::people, AppState, ServerError};
use app::budget::people::{GrantKind, NodePeople};
use axum::{
    extract::{Query, State},
    http::StatusCode,
    Json,
};
use serde::Deserialize;

/// `{"path": "ai/olmo", "username": "ada"}`, or the same as query parameters.
#[derive(Deserialize)]
pub struct Grant {
    path: String,
    username: String,
}

async fn change(
    state: &AppState,
    user: &app::model::CurrentUser,
    kind: GrantKind,
    grant: &Grant,
    add: bool,
) -> Result<NodePeople, ServerError> {
    people::change(
        &state.pool,
        user,
        kind,
        &grant.path,
        &grant.username,
        add,
        state.runtime.now(),
    )
    .await
}

/// `POST /api/v1/tree/members`: 201 with the node's people.
pub async fn add_member(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Json(grant): Json<Grant>,
) -> Result<(StatusCode, Json<NodePeople>), ServerError> {
    let people = change(&state, &user, GrantKind::Member, &grant, true).await?;
    Ok((StatusCode::CREATED, Json(people)))
}

/// `DELETE /api/v1/tree/members?path=…&username=…`.
pub async fn remove_member(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(grant): Query<Grant>,
) -> Result<Json<NodePeople>, ServerError> {
    Ok(Json(
        change(&state, &user, GrantKind::Member, &grant, false).await?,
    ))
}

/// `POST /api/v1/tree/owners`: 201 with the node's people.
pub async fn add_owner(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Json(grant): Json<Grant>,
) -> Result<(StatusCode, Json<NodePeople>), ServerError> {
    let people = change(&state, &user, GrantKind::Owner, &grant, true).await?;
    Ok((StatusCode::CREATED, Json(people)))
}

/// `DELETE /api/v1/tree/owners?path=…&username=…`.
pub async fn remove_owner(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(grant): Query<Grant>,
) -> Result<Json<NodePeople>, ServerError> {
    Ok(Json(
        change(&state, &user, GrantKind::Owner, &grant, false).await?,
    ))
}

#[derive(Deserialize)]
pub struct PathQuery {
    path: String,
}

/// `GET /api/v1/tree/people?path=…`: the node's owners, members and their history.
pub async fn people(
    State(state): State<AppState>,
    ApiUser(user): ApiUser,
    Query(q): Query<PathQuery>,
) -> Result<Json<NodePeople>, ServerError> {
    Ok(Json(people::people(&state.pool, &user, &q.path).await?))
}

/// `GET /api/v1/tree/shares?path=…`: the node's share versions and its effective share over time.
pub async fn shares(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<PathQuery>,
) -> Result<Json<app::budget::shares::ShareHistory>, ServerError> {
    Ok(Json(
        crate::budget::shares::history(&state.pool, &q.path).await?,
    ))
}
