//! An explicit size limit on every request body, by route: a declared length over the limit is
//! refused at once with `413` and a sentence; a body without a declared length is cut off at the
//! limit as it is read. Hand-written over tower-http's `RequestBodyLimitLayer` because the limit
//! depends on the path and server functions (Leptos) read their bodies without axum's
//! `DefaultBodyLimit`; the counting itself is `http_body_util::Limited`.

use crate::{agent::protocol::SYNC_BODY_LIMIT, lab::inputs::MAX_UPLOAD_BYTES, ServerError};
use axum::{
    body::Body,
    extract::Request,
    http::{
        header::{CONTENT_LENGTH, CONTENT_TYPE},
        StatusCode,
    },
    middleware::Next,
    response::{IntoResponse, Response},
};

/// Forms, JSON API calls and server functions.
pub const DEFAULT_LIMIT: usize = 1 << 20;
/// The most of an oversized body read (and dropped) so that its sender sees the refusal.
const DRAIN_LIMIT: usize = 64 << 20;
/// The lab's upload: three files of at most [`MAX_UPLOAD_BYTES`] each, form-encoded.
pub const LAB_LIMIT: usize = 3 * MAX_UPLOAD_BYTES * 3 + (1 << 20);

/// The limit for a path, and what the request is called in the refusal.
pub fn limit_for(path: &str) -> (usize, &'static str) {
    if path.starts_with("/api/agent/") {
        // The sync handler reads its own body (4 MiB) after recording the heartbeat.
        (SYNC_BODY_LIMIT, "an agent sync")
    } else if path.starts_with("/api/lab/start") {
        (LAB_LIMIT, "a lab run's files")
    } else {
        (DEFAULT_LIMIT, "a request")
    }
}

pub async fn limit_bodies(request: Request, next: Next) -> Response {
    let (limit, what) = limit_for(request.uri().path());
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64)
        && !request.uri().path().starts_with("/api/agent/")
    {
        // Read (and drop) what the client is sending before answering, up to a bound: a client
        // still uploading when the connection closes sees a reset instead of this answer.
        if declared.is_some_and(|len| len <= DRAIN_LIMIT as u64) {
            let _ = http_body_util::BodyExt::collect(http_body_util::Limited::new(
                request.into_body(),
                DRAIN_LIMIT,
            ))
            .await;
        }
        return too_large(limit, what).into_response();
    }
    let (parts, body) = request.into_parts();
    let body = Body::new(http_body_util::Limited::new(body, limit));
    let response = next.run(Request::from_parts(parts, body)).await;
    // Extractors that hit the limit answer 413 in plain text; say it the way every error is said.
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json {
        return too_large(limit, what).into_response();
    }
    response
}

pub fn too_large(limit: usize, what: &str) -> ServerError {
    ServerError::TooLarge(format!(
        "The body of {what} may be at most {}; this one is larger.",
        size(limit)
    ))
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_has_its_limit() {
        assert_eq!(limit_for("/api/agent/v1/sync").0, SYNC_BODY_LIMIT);
        assert!(limit_for("/api/lab/start").0 > 3 * MAX_UPLOAD_BYTES);
        assert_eq!(limit_for("/api/v1/workloads").0, DEFAULT_LIMIT);
        assert_eq!(limit_for("/login").0, DEFAULT_LIMIT);
    }

    #[test]
    fn the_refusal_says_the_limit() {
        assert_eq!(
            too_large(DEFAULT_LIMIT, "a request").to_string(),
            "The body of a request may be at most 1 MiB; this one is larger."
        );
    }
}
