//! The JSON API for scripts (`/api/v1`), authenticated by personal tokens
//! (`Authorization: Bearer hgt_…`) or, for the pages, the session.

pub mod auth;
pub mod body;
pub mod changes;
pub mod people;
pub mod reports;
pub mod stream;
pub mod tree;
pub mod workloads;

use crate::AppState;
use axum::{
    routing::{delete, get, post},
    Router,
};

/// The event stream: long-lived by design, so outside the request timeout (it ends when the
/// server stops).
pub fn stream_routes() -> Router<AppState> {
    Router::new().route("/api/v1/stream", get(stream::stream))
}

/// Every other JSON API route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/workloads",
            post(workloads::submit).get(workloads::list),
        )
        .route("/api/v1/workloads/{id}", get(workloads::detail))
        .route("/api/v1/workloads/{id}/cancel", post(workloads::cancel))
        .route("/api/v1/workloads/{id}/log", get(workloads::log))
        .route("/api/v1/reports/quarter", get(reports::quarter))
        .route("/api/v1/reports/usage.csv", get(reports::usage_csv))
        .route("/api/v1/reports/quarter.csv", get(reports::quarter_csv))
        .route("/api/v1/reports/review", get(reports::range))
        .route("/api/v1/reports/review.csv", get(reports::range_csv))
        .route("/api/v1/reports/people", get(reports::people))
        .route("/api/v1/reports/trend", get(reports::trend))
        .route("/api/v1/reports/trend.csv", get(reports::trend_csv))
        .route("/api/v1/tree", get(tree::tree))
        .route("/api/v1/tree/people", get(people::people))
        .route("/api/v1/tree/shares", get(people::shares))
        .route(
            "/api/v1/tree/members",
            post(people::add_member).delete(people::remove_member),
        )
        .route(
            "/api/v1/tree/owners",
            post(people::add_owner).delete(people::remove_owner),
        )
        .route(
            "/api/v1/change-requests",
            post(changes::propose).get(changes::list),
        )
        .route("/api/v1/change-requests/{id}", get(changes::get))
        .route(
            "/api/v1/change-requests/{id}/approve",
            post(changes::approve),
        )
        .route("/api/v1/change-requests/{id}/reject", post(changes::reject))
        .route(
            "/api/v1/change-requests/{id}/withdraw",
            post(changes::withdraw),
        )
        .route("/api/v1/change-requests/{id}/rebase", post(changes::rebase))
        .route("/api/v1/change-requests/{id}/impact", get(changes::impact))
        .route("/api/v1/nodes", get(tree::nodes))
        .route("/api/v1/clusters", get(tree::clusters))
        .route("/api/v1/nodes/{name}", delete(tree::remove_node))
        .route("/api/v1/nodes/{name}/{action}", post(tree::node_action))
}
