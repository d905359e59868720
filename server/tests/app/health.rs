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
    app.runtime
        .pass(server::users::service::now())
        .await
        .unwrap();
    let response = app.get("/healthz", None).await;
    assert_eq!(response.json()["scheduler"], "leader");
}

#[tokio::test]
async fn health_check_answers_unavailable_when_the_database_is_gone() {
    let app = TestApp::new().await;
    app.pool.close().await;
    let response = app.get("/healthz", None).await;
    assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
}
