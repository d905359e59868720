use crate::support::TestApp;
use axum::http::StatusCode;

#[tokio::test]
async fn health_check_answers_ok_when_the_database_is_reachable() {
    let app = TestApp::new().await;
    let response = app.get("/healthz", None).await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.json()["database"], "ok");
    assert_eq!(
        response.json()["scheduler"],
        "follower",
        "no decision pass has claimed the lease yet"
    );
    app.runtime.pass(crate::support::now()).await.unwrap();
    let response = app.get("/healthz", None).await;
    assert_eq!(response.json()["scheduler"], "leader");
}

#[tokio::test]
async fn readiness_fails_without_the_database_and_says_nothing_of_why_while_liveness_holds() {
    let app = TestApp::new().await;
    app.pool.close().await;
    for path in ["/healthz", "/readyz"] {
        let response = app.get(path, None).await;
        assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.json()["database"],
            "unreachable",
            "the error's text stays in the log: {}",
            response.body
        );
    }
    let live = app.get("/livez", None).await;
    assert_eq!(live.status, StatusCode::OK);
}

#[tokio::test]
async fn every_response_carries_a_request_id_for_the_log() {
    let app = TestApp::new().await;
    let first = app.get("/livez", None).await;
    let second = app.get("/login", None).await;
    let id = |r: &crate::support::TestResponse| {
        r.headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .expect("an x-request-id header")
    };
    assert_ne!(id(&first), id(&second), "each request has its own id");
}
