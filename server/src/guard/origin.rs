//! CSRF defence: a write (POST, PUT, PATCH, DELETE) authenticated by the session cookie must come
//! from a page of this site. Browsers send `Origin` on such requests (and `Sec-Fetch-Site`); a
//! forged cross-site form or fetch carries the other site's origin and is refused before it
//! reaches any handler. Requests with a bearer token and no cookie (scripts, agents) carry no
//! ambient credential and are not checked; one with a cookie is checked, bearer or not (the pages'
//! server functions authenticate by the cookie). The session cookie is also `SameSite=Lax`.

use crate::AppState;
use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

pub async fn same_origin_writes(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if is_write(request.method()) && !script(request.headers()) {
        if let Err(why) = check(request.headers(), state.proxy.public_authority.as_deref()) {
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

/// A bearer token and no cookie: a script or an agent, not a browser's ambient credential.
fn script(headers: &HeaderMap) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    bearer && !headers.contains_key(header::COOKIE)
}

/// `Ok` when the request is same-origin (its `Host`, or the `--public-url` a proxy serves it
/// under) or carries no browser provenance at all (a CLI client).
fn check(headers: &HeaderMap, public: Option<&str>) -> Result<(), &'static str> {
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
        (Some(url), _)
            if public.is_some()
                && authority(url).map(str::to_ascii_lowercase).as_deref() == public =>
        {
            Ok(())
        }
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
        assert!(check(
            &headers(&[("host", "gpu.lab:3000"), ("origin", "http://gpu.lab:3000")]),
            None
        )
        .is_ok());
        assert!(check(
            &headers(&[
                ("host", "gpu.lab"),
                ("referer", "https://gpu.lab/workloads/new")
            ]),
            None
        )
        .is_ok());
        assert!(check(&headers(&[("host", "gpu.lab")]), None).is_ok());
        assert!(check(
            &headers(&[("host", "gpu.lab"), ("origin", "https://evil.example")]),
            None
        )
        .is_err());
        assert!(check(&headers(&[("host", "gpu.lab"), ("origin", "null")]), None).is_err());
        assert!(check(
            &headers(&[
                ("host", "gpu.lab"),
                ("origin", "http://gpu.lab.evil.example")
            ]),
            None
        )
        .is_err());
        assert!(check(
            &headers(&[("host", "gpu.lab"), ("sec-fetch-site", "cross-site")]),
            None
        )
        .is_err());
        assert!(check(
            &headers(&[
                ("host", "gpu.lab"),
                ("sec-fetch-site", "same-site"),
                ("origin", "http://gpu.lab")
            ]),
            None
        )
        .is_err());
    }

    #[test]
    fn behind_a_proxy_that_rewrites_host_the_public_url_is_the_sites_origin() {
        let behind = headers(&[
            ("host", "127.0.0.1:3000"),
            ("origin", "https://hourglass.example"),
        ]);
        assert!(check(&behind, None).is_err());
        assert!(check(&behind, Some("hourglass.example")).is_ok());
        assert!(check(
            &headers(&[
                ("host", "127.0.0.1:3000"),
                ("origin", "https://evil.example")
            ]),
            Some("hourglass.example")
        )
        .is_err());
    }
}
