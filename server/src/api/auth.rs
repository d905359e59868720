//! Who is calling the JSON API.

use crate::{agent::api::bearer, tokens::service as tokens, AppState, ServerError};
use app::model::CurrentUser;
use axum::{extract::FromRequestParts, http::request::Parts};

/// The caller: the owner of a valid personal token, or the session's signed-in user.
pub struct ApiUser(pub CurrentUser);

impl FromRequestParts<AppState> for ApiUser {
    type Rejection = ServerError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(token) = bearer(parts) {
            return tokens::authenticate(&state.pool, token, state.runtime.now())
                .await?
                .map(ApiUser)
                .ok_or(ServerError::Unauthenticated);
        }
        parts
            .extensions
            .get::<CurrentUser>()
            .cloned()
            .map(ApiUser)
            .ok_or(ServerError::Unauthenticated)
    }
}
