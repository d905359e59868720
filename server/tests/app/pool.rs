//! No request holds two database connections at once. With a pool of N connections, N requests
//! each holding one while asking for a second wait on each other until the pool gives up — every
//! thread idle, pages and agents' syncs timing out together. On a one-connection pool that shows
//! at once: every page, the JSON API and an agent sync must still answer.

use crate::support::{seed_org, TestApp};
use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use serde_json::json;

#[tokio::test]
async fn every_page_and_api_answers_on_a_single_database_connection() {
    every_page_and_api_answers_on_one_connection(false).await;
}

/// With several clusters, lists, the tree and the review read each one's figures: still on the
/// one connection a request holds.
#[tokio::test]
async fn every_page_and_api_answers_on_a_single_database_connection_with_two_clusters() {
    every_page_and_api_answers_on_one_connection(true).await;
}

async fn every_page_and_api_answers_on_one_connection(two_clusters: bool) {
    let app = TestApp::with_one_connection().await;
    let (node_token, token) = seed_org(&app.pool).await;
    if two_clusters {
        let (_, west_token) = server::nodes::service::register_node(
            &app.pool,
            "w1",
            Some("west"),
            crate::support::now(),
        )
        .await
        .unwrap();
        let body = json!({ "name": "w1", "gpus": 4, "cluster": "west" });
        let sync = app
            .post_json("/api/agent/v1/sync", &west_token, &body)
            .await;
        assert_eq!(sync.status, StatusCode::OK, "{}", sync.body);
    }
    server::users::service::create_user(
        &app.pool,
        "admin",
        "admin",
        "long enough 1".into(),
        crate::support::now(),
    )
    .await
    .unwrap();
    let agent = |body: serde_json::Value| {
        Request::post("/api/agent/v1/sync")
            .header(header::AUTHORIZATION, format!("Bearer {node_token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let sync = app.send(agent(json!({ "name": "n1", "gpus": 2 }))).await;
    assert_eq!(sync.status, StatusCode::OK, "{}", sync.body);
    let body = json!({ "project": "ai/olmo", "name": "w", "command": "true", "gpus": 1,
                       "min_runtime_s": 60, "resumable": true, "priority": 0,
                       "cluster": "default" });
    let submitted = app.post_json("/api/v1/workloads", &token, &body).await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);
    app.runtime.pass(crate::support::now()).await.unwrap();
    let sync = app
        .send(agent(json!({ "name": "n1", "gpus": 2, "wait_s": 0 })))
        .await;
    assert_eq!(sync.status, StatusCode::OK, "{}", sync.body);

    let cookie = app.sign_in("admin", "long enough 1").await;
    for path in [
        "/",
        "/workloads",
        "/workloads/new",
        "/workloads/1",
        "/queue",
        "/nodes",
        "/tokens",
        "/settings",
        "/tree",
        "/approvals",
        "/reports",
        "/users",
        "/lab",
    ] {
        let page = app.get(path, Some(&cookie)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(
            !page.body.contains("Something went wrong on our side"),
            "{path} failed to load its data on one connection"
        );
    }
    for path in [
        "/api/v1/workloads",
        "/api/v1/workloads/1",
        "/api/v1/workloads/1/log",
        "/api/v1/nodes",
        "/api/v1/tree",
        "/api/v1/change-requests",
        "/api/v1/reports/quarter?year=2026&quarter=4",
        "/api/v1/reports/usage.csv",
        "/api/v1/clusters",
        "/api/v1/tree?cluster=default",
    ] {
        let response = app
            .send(
                Request::get(path)
                    .header(header::AUTHORIZATION, format!("Bearer {token}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(response.status, StatusCode::OK, "{path}: {}", response.body);
    }
}

#[tokio::test]
async fn agents_sync_and_the_scheduler_decides_while_page_renders_hold_every_page_connection() {
    let app = TestApp::with_one_connection().await;
    let (node_token, token) = seed_org(&app.pool).await;
    let sync = |wait_s: u64| {
        Request::post("/api/agent/v1/sync")
            .header(header::AUTHORIZATION, format!("Bearer {node_token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({ "name": "n1", "gpus": 2, "wait_s": wait_s }).to_string(),
            ))
            .unwrap()
    };
    let registered = app.send(sync(0)).await;
    assert_eq!(registered.status, StatusCode::OK, "{}", registered.body);
    let body = json!({ "project": "ai/olmo", "name": "w", "command": "true", "gpus": 1,
                       "min_runtime_s": 60, "resumable": true, "priority": 0 });
    let submitted = app.post_json("/api/v1/workloads", &token, &body).await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);

    // A crowd of renders has taken the page pool's only connection and keeps it.
    let _held = app.pool.acquire().await.unwrap();
    let first = app.send(sync(0)).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    app.runtime
        .pass(crate::support::now())
        .await
        .expect("the scheduler decides on its own connections");
    let second = app.send(sync(0)).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    let answer: serde_json::Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(
        answer["start"].as_array().map(Vec::len),
        Some(1),
        "the node is handed the workload the pass placed: {answer}"
    );
}

/// SQLite ends a transaction on its own when a commit fails for want of disk; sqlx's rollback on
/// drop then fails and the connection still counts as inside a transaction, so every later write
/// on it failed ("begin_with at non-zero transaction depth") and the scheduler stopped deciding
/// for good. Such a connection is closed and replaced when it comes back to the pool.
#[tokio::test]
async fn a_connection_whose_transaction_the_database_ended_is_not_reused() {
    let app = TestApp::with_one_connection().await;
    {
        let mut tx = server::db::begin_write(&app.pool).await.unwrap();
        // The database ends the transaction under sqlx's feet (as SQLite does on SQLITE_FULL);
        // on PostgreSQL this ends it the same way.
        sqlx::query("rollback").execute(&mut *tx).await.unwrap();
    }
    for attempt in 0..3 {
        let mut tx = server::db::begin_write(&app.pool)
            .await
            .unwrap_or_else(|error| panic!("write {attempt} after the ended transaction: {error}"));
        sqlx::query("update setting set value = value where key = 'none'")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
}
