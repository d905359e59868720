//! The HTTP application: [`build_app`] is the one entry point `serve` and the tests share.

use crate::{auth::session, backend::ServerBackend, AppState};
use app::{backend::SharedBackend, shell, App};
use axum::{
    extract::State,
    http::StatusCode,
    middleware,
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::sync::Arc;

pub fn build_app(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let backend: SharedBackend = Arc::new(ServerBackend::new(
        state.pool.clone(),
        state.runtime.clone(),
        state.lab.clone(),
    ));
    let shell_options = state.leptos_options.clone();

    Router::new()
        .route("/healthz", get(healthz))
        .route("/login", post(session::login))
        .route("/logout", post(session::logout))
        .merge(crate::api::routes())
        .merge(crate::agent::api::routes())
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(backend.clone()),
            move || shell(shell_options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            session::load_user,
        ))
        .layer(session::layer(&state))
        .layer(middleware::from_fn(
            crate::guard::origin::same_origin_writes,
        ))
        .layer(middleware::from_fn(crate::guard::headers::security_headers))
        .layer(middleware::from_fn(crate::guard::body_limit::limit_bodies))
        .layer(axum::Extension(crate::guard::SignInThrottle::default()))
        .with_state(state)
}

/// `GET /healthz`: 200 when the database answers, 503 otherwise; `scheduler` says whether this
/// replica holds the scheduler lease (`leader`) or serves pages and API only (`follower`).
async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let scheduler = if state.runtime.is_leader() {
        "leader"
    } else {
        "follower"
    };
    match sqlx::query("select 1").execute(&state.pool).await {
        Ok(_) => (
            StatusCode::OK,
            Json(serde_json::json!({ "status": "ok", "database": "ok", "scheduler": scheduler })),
        ),
        Err(error) => {
            tracing::error!(%error, "health check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "status": "unavailable", "database": error.to_string() })),
            )
        }
    }
}
