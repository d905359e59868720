//! `GET /api/v1/stream`: server-sent events telling pages that workloads changed, so they refresh
//! at once instead of polling.

use super::auth::ApiUser;
use crate::AppState;
use axum::{
    extract::State,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::stream::{self, Stream};
use std::convert::Infallible;

pub async fn stream(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let changes = state.runtime.assignments();
    let runtime = state.runtime.clone();
    let events = stream::unfold(changes, move |mut changes| {
        let runtime = runtime.clone();
        async move {
            // The stream ends when the server stops, so a graceful shutdown does not wait on it.
            tokio::select! {
                changed = changes.changed() => changed.ok()?,
                _ = runtime.stopped() => return None,
            }
            let version = *changes.borrow_and_update();
            Some((
                Ok(Event::default().event("changed").data(version.to_string())),
                changes,
            ))
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
