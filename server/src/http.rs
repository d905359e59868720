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
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::{
    compression::{CompressionLayer, CompressionLevel},
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

/// The app's routes, generated once per process. Generating runs the app with resource loading
/// suppressed through a process-wide flag, so a resource first polled by any render meanwhile
/// waits forever (leptos#4773); done once, before anything serves, no render can meet it.
fn route_list() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> =
        std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

pub fn build_app(state: AppState) -> Router {
    let routes = route_list();
    let backend: SharedBackend = Arc::new(ServerBackend::new(
        state.pool.clone(),
        state.runtime.clone(),
        state.lab.clone(),
    ));
    let shell_options = state.leptos_options.clone();
    // Pages the router does not know (and missing files) are rendered by the fallback: with the
    // same backend, so their frame (the navigation's counts, the demo banner) loads as on any page.
    let fallback_backend = backend.clone();

    Router::new()
        .route("/healthz", get(readyz))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .route("/metrics", get(crate::metrics::http::metrics))
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
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::http::track,
        ))
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(
            move || provide_context(fallback_backend.clone()), shell
        ))
        // Nothing but the event stream may take longer (agents' held syncs answer within a third
        // of the heartbeat deadline and a minute at most).
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        // Pages and API answers are compressed as they are sent (brotli or gzip, whichever the
        // client prefers); the event stream is not (each event must reach the browser at once),
        // nor are the site's files, which the build compressed beforehand.
        .layer(compression())
        .merge(crate::api::stream_routes())
        .layer(middleware::from_fn_with_state(
            state.clone(),
            session::load_user,
        ))
        .layer(session::layer(&state))
        .layer(middleware::from_fn(crate::site::cache_pages))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::guard::origin::same_origin_writes,
        ))
        .layer(middleware::from_fn(crate::guard::headers::security_headers))
        .layer(middleware::from_fn(crate::guard::body_limit::limit_bodies))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(TraceLayer::new_for_http().make_span_with(request_span))
                .layer(PropagateRequestIdLayer::x_request_id()),
        )
        // The site's files need no session, request id or page headers: a page loads a hundred
        // or more small wasm chunks, and each header line is paid on every one of them.
        .merge(crate::site::files(std::path::Path::new(
            state.leptos_options.site_root.as_ref(),
        )))
        .with_state(state)
}

/// Brotli at quality 4 compresses a page about as well as gzip's best at a fraction of the cost
/// of brotli's best (11, meant for files compressed once).
fn compression() -> CompressionLayer {
    CompressionLayer::new()
        .br(true)
        .gzip(true)
        .quality(CompressionLevel::Precise(4))
}

/// The longest a request may take before it is answered `408`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Every log line written while serving a request carries its method, path and `x-request-id`
/// (also sent back in the response, so a person's report can be matched to the log).
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), id = %id)
}

/// `GET /livez`: 200 while the process serves requests (restart it otherwise); touches nothing.
async fn livez() -> impl IntoResponse {
    Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /readyz` (and `/healthz`, the same): 200 when the database answers, 503 otherwise (send
/// no traffic here); `scheduler` says whether this replica holds the scheduler lease (`leader`) or
/// serves pages and API only (`follower`). What failed goes to the log, not to the caller.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let scheduler = if state.runtime.is_leader() {
        "leader"
    } else {
        "follower"
    };
    match crate::db::ping(&state.pool).await {
        Ok(_) => (
            StatusCode::OK,
            Json(serde_json::json!({ "status": "ok", "database": "ok", "scheduler": scheduler })),
        ),
        Err(error) => {
            tracing::error!(%error, "readiness check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(
                    serde_json::json!({ "status": "unavailable", "database": "unreachable", "scheduler": scheduler }),
                ),
            )
        }
    }
}
