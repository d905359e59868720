//! Security headers on every response. The content security policy lets pages load only the
//! site's own scripts, styles, images, fonts and connections (the wasm bundle needs
//! `'wasm-unsafe-eval'`); the inline scripts Leptos writes carry the per-response nonce that
//! `app::shell` puts in the page's policy, so no injected inline script can run.

use axum::{
    extract::Request,
    http::{header, HeaderValue},
    middleware::Next,
    response::Response,
};

/// The policy for responses that are not pages (no inline script at all), built once.
static WITHOUT_NONCE: std::sync::LazyLock<HeaderValue> = std::sync::LazyLock::new(|| {
    HeaderValue::from_str(&app::CSP.replace(" 'nonce-{nonce}'", "")).expect("a valid header value")
});

pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    // Pages set their own policy with their nonce; everything else gets the policy without one.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, WITHOUT_NONCE.clone());
    }
    response
}
