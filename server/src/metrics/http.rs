//! `/metrics` and the HTTP request metrics.

use crate::{AppState, ServerError};
use axum::{
    extract::{MatchedPath, Request, State},
    http::{header, HeaderMap},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use std::time::Instant;

/// Counts each request to a declared route by that route's pattern (never the raw path, so
/// workload ids do not make a series each) with its status and latency to the response's head.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| route_label(p.as_str()));
    let method = request.method().to_string();
    let began = Instant::now();
    let response = next.run(request).await;
    if let Some(route) = route {
        state.runtime.metrics().request(
            &route,
            &method,
            response.status().as_u16(),
            began.elapsed().as_secs_f64(),
        );
    }
    response
}

/// A route pattern as a label: `/api/v1/workloads/{id}` reads `/api/v1/workloads/:id` (and a
/// wildcard `{*rest}` reads `*rest`), as dashboards name routes; braces inside a label value trip
/// up the simpler text-format parsers.
fn route_label(pattern: &str) -> String {
    pattern
        .replace("{*", "*")
        .replace('{', ":")
        .replace('}', "")
}

/// `GET /metrics`: OpenMetrics text for Prometheus. With `--metrics-token` set, only a request
/// carrying `Authorization: Bearer <token>` is answered.
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ServerError> {
    if let Some(expected) = &state.metrics_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        // Compared as digests, so the time taken says nothing about how much of it matched.
        if Sha256::digest(given.as_bytes()) != Sha256::digest(expected.as_bytes()) {
            return Err(ServerError::Unauthenticated);
        }
    }
    let mut out = String::new();
    state
        .runtime
        .metrics()
        .encode(&mut out)
        .map_err(|_| ServerError::Config("metrics could not be written".into()))?;
    super::scrape::encode(&state, &mut out).await?;
    out.push_str("# EOF\n");
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_route_label_names_its_parameters_without_braces() {
        assert_eq!(
            super::route_label("/api/v1/workloads/{id}/log"),
            "/api/v1/workloads/:id/log"
        );
        assert_eq!(super::route_label("/api/{*fn_name}"), "/api/*fn_name");
        assert_eq!(super::route_label("/metrics"), "/metrics");
    }
}
