//! CSRF defence: a write (POST, PUT, PATCH, DELETE) authenticated by the session cookie must come
//! from a page of this site. Browsers send `Origin` on such requests (and `Sec-Fetch-Site`); a
//! forged cross-site form or fetch carries the other site's origin and is refused before it
//! reaches any handler. Requests with a bearer token (scripts, agents) carry no ambient
//! credential and are not checked; the session cookie is also `SameSite=Lax`.

use axum::{
    extract::Request,
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

pub async fn same_origin_writes(request: Request, next: Next) -> Response {
    if is_write(request.method()) && !has_bearer(request.headers()) {
        if let Err(why) = check(request.headers()) {
            tracing::warn!(path = %request.uri().path(), why, "cross-site write refused");
            return (
                StatusCode::FORBIDDEN,
                "This request came from another site and was refused. Reload the page and try again.",
            )
                .into_response();
        }
    }
    next.run(request).await
}

fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "))
}

/// `Ok` when the request is same-origin or carries no browser provenance at all (a CLI client).
fn check(headers: &HeaderMap) -> Result<(), &'static str> {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return Err("Sec-Fetch-Site is not same-origin");
        }
    }
    let host = text(header::HOST);
    let origin = text(header::ORIGIN).filter(|o| *o != "null");
    let claimed = match (origin, text(header::REFERER)) {
        (Some(origin), _) => Some(origin),
        (None, Some(referer)) => Some(referer),
        (None, None) if headers.get(header::ORIGIN).is_some() => {
            return Err("Origin is null");
        }
        (None, None) => None,
    };
    match (claimed, host) {
        (None, _) => Ok(()),
        (Some(url), Some(host)) if authority(url) == Some(host) => Ok(()),
        (Some(_), None) => Err("no Host header to compare the origin with"),
        (Some(_), Some(_)) => Err("Origin does not match Host"),
    }
}

/// `host:port` of `scheme://host:port/path`.
fn authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    Some(rest.split(['/', '?', '#']).next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn same_origin_and_header_less_writes_pass_and_cross_site_ones_do_not() {
        assert!(check(&headers(&[
            ("host", "gpu.lab:3000"),
            ("origin", "http://gpu.lab:3000")
        ]))
        .is_ok());
        assert!(check(&headers(&[
            ("host", "gpu.lab"),
            ("referer", "https://gpu.lab/workloads/new")
        ]))
        .is_ok());
        assert!(check(&headers(&[("host", "gpu.lab")])).is_ok());
        assert!(check(&headers(&[
            ("host", "gpu.lab"),
            ("origin", "https://evil.example")
        ]))
        .is_err());
        assert!(check(&headers(&[("host", "gpu.lab"), ("origin", "null")])).is_err());
        assert!(check(&headers(&[
            ("host", "gpu.lab"),
            ("origin", "http://gpu.lab.evil.example")
        ]))
        .is_err());
        assert!(check(&headers(&[
            ("host", "gpu.lab"),
            ("sec-fetch-site", "cross-site")
        ]))
        .is_err());
        assert!(check(&headers(&[
            ("host", "gpu.lab"),
            ("sec-fetch-site", "same-site"),
            ("origin", "http://gpu.lab")
        ]))
        .is_err());
    }
}
