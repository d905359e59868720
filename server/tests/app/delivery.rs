//! How responses travel: pages and API answers compressed per request, the built site's files
//! sent precompressed and cached by name, the event stream left alone.

use crate::support::TestApp;
use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use std::io::Read;
use tower::ServiceExt;

const PASSWORD: &str = "long enough 1";
const WASM: &str = "hourglass.AbCdEfGh12345678_-xYz9.wasm";

/// Writes a built site as `cargo leptos build --release --precompress` leaves it: a hashed wasm
/// with its brotli and gzip copies (different bytes, so the test sees which one was sent), an
/// unhashed stylesheet and a vendored asset.
fn build_site(app: &TestApp) {
    let site = app.db.dir.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    std::fs::create_dir_all(site.join("assets")).unwrap();
    std::fs::write(site.join("pkg").join(WASM), "plain wasm").unwrap();
    std::fs::write(site.join("pkg").join(format!("{WASM}.br")), "brotli wasm").unwrap();
    std::fs::write(site.join("pkg").join(format!("{WASM}.gz")), "gzip wasm").unwrap();
    std::fs::write(site.join("pkg").join("hourglass.css"), "body {}").unwrap();
    std::fs::write(
        site.join("assets").join("echarts-5.6.0-hourglass.min.js"),
        "echarts",
    )
    .unwrap();
}

async fn get(
    app: &TestApp,
    path: &str,
    encoding: &str,
    cookie: Option<&str>,
) -> (StatusCode, header::HeaderMap, Vec<u8>) {
    let mut request = Request::get(path).header(header::ACCEPT, "text/html");
    if !encoding.is_empty() {
        request = request.header(header::ACCEPT_ENCODING, encoding);
    }
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    let response = app
        .router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, headers, body.to_vec())
}

fn header(headers: &header::HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test]
async fn pages_are_compressed_for_browsers_that_accept_it_and_never_cached_unasked() {
    let app = TestApp::new().await;
    crate::support::seed_org(&app.pool).await;
    let cookie = app.sign_in("ada", PASSWORD).await;

    let (status, headers, body) = get(&app, "/workloads", "gzip", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "gzip");
    assert_eq!(header(&headers, header::CACHE_CONTROL), "no-cache, private");
    let mut html = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut html)
        .expect("gzip");
    assert!(html.contains("<html"), "{html}");

    let (_, headers, body) = get(&app, "/workloads", "br;q=1.0, gzip;q=0.5", Some(&cookie)).await;
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "br");
    assert!(
        !String::from_utf8_lossy(&body).contains("<html"),
        "brotli, not plain HTML"
    );

    let (_, headers, body) = get(&app, "/workloads", "", Some(&cookie)).await;
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "");
    assert!(String::from_utf8_lossy(&body).contains("<html"));

    // API answers are compressed too, but not those too short to gain from it.
    let (_, headers, body) = get(&app, "/api/v1/workloads", "gzip", Some(&cookie)).await;
    assert!(body.len() < 32, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "");
    let (status, headers, _) = get(&app, "/api/v1/tree", "gzip", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "gzip");
}

#[tokio::test]
async fn the_event_stream_is_never_compressed() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", PASSWORD).await;
    let cookie = app.sign_in("ada", PASSWORD).await;
    let request = Request::get("/api/v1/stream")
        .header(header::ACCEPT, "text/event-stream")
        .header(header::ACCEPT_ENCODING, "br, gzip")
        .header(header::COOKIE, &cookie)
        .body(Body::empty())
        .unwrap();
    // The stream never ends: only its head is read.
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(response.headers(), header::CONTENT_TYPE),
        "text/event-stream"
    );
    assert_eq!(header(response.headers(), header::CONTENT_ENCODING), "");
}

#[tokio::test]
async fn the_sites_files_go_precompressed_and_hashed_names_are_kept_a_year() {
    let app = TestApp::new().await;
    build_site(&app);
    let path = format!("/pkg/{WASM}");

    let (status, headers, body) = get(&app, &path, "gzip, br", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "br");
    assert_eq!(body, b"brotli wasm");
    assert_eq!(header(&headers, header::CONTENT_TYPE), "application/wasm");
    assert_eq!(
        header(&headers, header::CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    assert!(
        headers.get(header::SET_COOKIE).is_none(),
        "files need no session"
    );

    let (_, headers, body) = get(&app, &path, "gzip", None).await;
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "gzip");
    assert_eq!(body, b"gzip wasm");

    let (_, headers, body) = get(&app, &path, "", None).await;
    assert_eq!(header(&headers, header::CONTENT_ENCODING), "");
    assert_eq!(body, b"plain wasm");

    // A file without a hash in its name may change under it: browsers ask again.
    let (status, headers, _) = get(&app, "/pkg/hourglass.css", "br", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, header::CACHE_CONTROL), "no-cache");
    assert!(
        headers.get(header::LAST_MODIFIED).is_some(),
        "revalidated by date"
    );

    // Vendored assets carry their version in their name.
    let (status, headers, _) = get(&app, "/assets/echarts-5.6.0-hourglass.min.js", "", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, header::CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );

    let (status, headers, _) = get(&app, "/pkg/hourglass.missing.js", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(header(&headers, header::CACHE_CONTROL), "");
}
