//! The outgoing webhook against a real HTTP receiver: admins only, a URL that does not read is
//! refused and nothing changes, messages arrive as `{"text": …}`, a failure is retried after a
//! backoff, and the history never shows the URL's secret path.

use crate::live::{job, Live};
use axum::{extract::State, http::StatusCode, routing::post, Json, Router};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A receiver that answers 500 to its first `failures` posts, then 200, keeping every body.
struct Receiver {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

async fn receiver(failures: usize) -> Receiver {
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = Router::new()
        .route(
            "/services/T000/B000/secret-path",
            post(
                |State((bodies, failures)): State<(Arc<Mutex<Vec<Value>>>, usize)>,
                 Json(body): Json<Value>| async move {
                    let mut bodies = bodies.lock().unwrap();
                    bodies.push(body);
                    if bodies.len() <= failures {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::OK
                    }
                },
            ),
        )
        .with_state((bodies.clone(), failures));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/services/T000/B000/secret-path",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Receiver { url, bodies }
}

async fn call(live: &Live, path: &str, form: &[(&str, &str)], who: &str) -> (u16, Value) {
    let cookie = live.app.sign_in(who, "long enough 1").await;
    let response = live.app.post_form(path, form, Some(&cookie)).await;
    (response.status.as_u16(), response.json())
}

fn texts(r: &Receiver) -> Vec<String> {
    r.bodies
        .lock()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn only_admins_set_the_webhook_and_a_url_that_does_not_read_changes_nothing() {
    let live = Live::start().await;
    let target = receiver(0).await;
    let (status, body) = call(
        &live,
        "/api/settings/webhook/set",
        &[("url", &target.url)],
        "ada",
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = call(&live, "/api/settings/webhook", &[], "ada").await;
    assert_eq!(status, 403);
    for bad in [
        "ftp://hooks.example.com/x",
        "hooks.example.com/x",
        "https://",
    ] {
        let (status, body) =
            call(&live, "/api/settings/webhook/set", &[("url", bad)], "root").await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(body.to_string().contains("url"), "names the field: {body}");
    }
    let (status, view) = call(&live, "/api/settings/webhook", &[], "root").await;
    assert_eq!(status, 200);
    assert_eq!(view["url"], Value::Null, "nothing was set: {view}");
    let (status, _) = call(&live, "/api/settings/webhook/test", &[], "root").await;
    assert_eq!(status, 422, "no URL to test yet");
}

#[tokio::test]
async fn events_reach_the_webhook_as_slack_text_and_a_failed_post_is_retried_after_a_backoff() {
    let live = Live::start().await;
    let target = receiver(1).await;
    let (status, view) = call(
        &live,
        "/api/settings/webhook/set",
        &[("url", &target.url), ("reason", "the lab's channel")],
        "root",
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let shown = view["url"].as_str().unwrap();
    assert!(
        shown.starts_with("http://127.0.0.1:") && shown.ends_with("/…"),
        "{shown}"
    );
    assert!(!shown.contains("secret"), "the path stays secret: {shown}");
    let (_, settings) = call(&live, "/api/settings/get", &[], "root").await;
    assert!(
        !settings.to_string().contains("secret-path"),
        "nor the history: {settings}"
    );
    assert!(settings.to_string().contains("Webhook URL"));

    // A request that waits for pat: the next pass carries it.
    let (status, _) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            json!({ "node": "ai", "shares": { "ai/olmo": 2.0, "ai/molmo": 1.0 }, "justification": "deadline", "effective_at": null }),
        )
        .await;
    assert_eq!(status, 201);
    let pool = &live.app.pool;
    let client = server::webhook::deliver::client();
    let now = live.runtime.now() + 10;
    server::webhook::deliver::pass(pool, &client, now)
        .await
        .unwrap();
    assert_eq!(texts(&target).len(), 1, "tried once");
    let (_, view) = call(&live, "/api/settings/webhook", &[], "root").await;
    assert_eq!(view["deliveries"][0]["state"], "pending", "{view}");
    assert_eq!(
        view["deliveries"][0]["error"],
        "the webhook answered 500 Internal Server Error"
    );

    // Not before its backoff; then again, and delivered.
    server::webhook::deliver::pass(pool, &client, now + 1)
        .await
        .unwrap();
    assert_eq!(texts(&target).len(), 1, "waits for its backoff");
    let backoff = server::webhook::deliver::backoff(1).as_secs() as i64;
    server::webhook::deliver::pass(pool, &client, now + backoff)
        .await
        .unwrap();
    let sent = texts(&target);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], sent[1]);
    assert!(
        sent[1].starts_with("Hourglass: Change request #") && sent[1].contains("on ai waits for a decision of its owners: ada proposes new shares: \u{201c}deadline\u{201d}"),
        "{}", sent[1]
    );
    let (_, view) = call(&live, "/api/settings/webhook", &[], "root").await;
    assert_eq!(view["deliveries"][0]["state"], "sent", "{view}");
    assert_eq!(view["deliveries"][0]["attempts"], 2);

    // Nothing new: nothing sent. The test button sends at once.
    server::webhook::deliver::pass(pool, &client, now + 60)
        .await
        .unwrap();
    assert_eq!(texts(&target).len(), 2);
    let (status, _) = call(&live, "/api/settings/webhook/test", &[], "root").await;
    assert_eq!(status, 200);
    assert_eq!(texts(&target)[2], "Hourglass: a test message from root.");

    // A workload that fails on a real agent is told to the channel, with its owner.
    let mut live = live;
    live.add_agent("n1", 2).await;
    let failing = live
        .submit("bob", job("ai/molmo", "broken", "exit 3", 1, 0, false))
        .await;
    live.wait_for_state(failing, "failed").await;
    server::webhook::deliver::pass(&live.app.pool, &client, now + 120)
        .await
        .unwrap();
    assert_eq!(
        texts(&target)[3],
        format!(
            "Hourglass: Failed workload broken (#{failing}) of bob: It failed with exit code 3."
        )
    );
}

#[test]
fn the_backoff_doubles_from_two_seconds_to_at_most_thirty_two() {
    use server::webhook::deliver::backoff;
    let waits: Vec<u64> = (1..=6).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(waits, [2, 4, 8, 16, 32, 32]);
}
