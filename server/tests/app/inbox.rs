//! The inbox and the navigation's counts: approvals waiting, decisions, a real preemption and a
//! real failure on a live cluster, each person seeing only their own.

use crate::live::{job, Live};
use serde_json::{json, Value};

async fn call(live: &Live, path: &str, cookie: Option<&str>) -> (u16, Value) {
    let response = live.app.post_form(path, &[], cookie).await;
    let body = if response.body.is_empty() {
        Value::Null
    } else {
        response.json()
    };
    (response.status.as_u16(), body)
}

fn kinds(inbox: &Value) -> Vec<String> {
    inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn each_person_is_told_what_waits_for_them_and_what_happened_to_their_work_and_reading_clears_the_count(
) {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    // bob's free sweep is preempted by ada's debug run; his next workload fails.
    let free = live
        .submit("bob", job("ai/molmo", "sweep", "sleep 60", 4, 0, false))
        .await;
    live.wait_for_state(free, "running").await;
    live.submit("ada", job("ai/olmo", "debug", "sleep 1", 2, 900, true))
        .await;
    live.wait_for_state(free, "preempted").await;
    let failing = live
        .submit("bob", job("ai/molmo", "broken", "exit 3", 1, 0, false))
        .await;
    live.wait_for_state(failing, "failed").await;
    // ada asks to rebalance ai: pat owns it.
    let (status, request) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            json!({ "node": "ai", "shares": { "ai/olmo": 2.0, "ai/molmo": 1.0 }, "justification": "deadline", "effective_at": null }),
        )
        .await;
    assert_eq!(status, 201, "{request}");

    let bob = live.app.sign_in("bob", "long enough 1").await;
    let pat = live.app.sign_in("pat", "long enough 1").await;
    let ada = live.app.sign_in("ada", "long enough 1").await;

    let (status, inbox) = call(&live, "/api/inbox", Some(&bob)).await;
    assert_eq!(status, 200, "{inbox}");
    assert_eq!(kinds(&inbox), ["failed", "preempted"], "{inbox}");
    let items = inbox["items"].as_array().unwrap();
    assert!(items[0]["sentence"]
        .as_str()
        .unwrap()
        .starts_with("It failed with exit code 3"));
    assert!(
        items[1]["sentence"]
            .as_str()
            .unwrap()
            .starts_with("Preempted at"),
        "the reason sentence of the workload's page: {inbox}"
    );
    assert_eq!(items[1]["href"], format!("/workloads/{free}"));
    assert_eq!(inbox["unread"], 2);
    let (_, counts) = call(&live, "/api/nav/counts", Some(&bob)).await;
    assert_eq!(counts, json!({ "awaiting": 0, "unread": 2 }));

    let (_, inbox) = call(&live, "/api/inbox", Some(&pat)).await;
    assert_eq!(kinds(&inbox), ["approval"], "pat decides for ai: {inbox}");
    assert!(inbox["items"][0]["sentence"]
        .as_str()
        .unwrap()
        .contains("deadline"));
    let (_, counts) = call(&live, "/api/nav/counts", Some(&pat)).await;
    assert_eq!(counts, json!({ "awaiting": 1, "unread": 1 }));
    // Every page's navigation says so, the page for an address that does not exist too (it is
    // rendered by the fallback, which must give the page the server's backend as well).
    for path in ["/approvals", "/no-such-page"] {
        let page = live.app.get(path, Some(&pat)).await;
        assert!(
            page.body.contains(", 1 waiting for you"),
            "{path} ({}) shows the count",
            page.status
        );
    }
    let (_, inbox) = call(&live, "/api/inbox", Some(&ada)).await;
    assert_eq!(
        kinds(&inbox),
        Vec::<String>::new(),
        "nothing of bob's: {inbox}"
    );

    // pat decides: the request leaves pat's inbox and ada hears of it.
    let id = request["id"].as_i64().unwrap();
    let (status, _) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/reject"),
            json!({ "comment": "not this quarter" }),
        )
        .await;
    assert_eq!(status, 200);
    let (_, counts) = call(&live, "/api/nav/counts", Some(&pat)).await;
    assert_eq!(counts, json!({ "awaiting": 0, "unread": 0 }));
    let (_, inbox) = call(&live, "/api/inbox", Some(&ada)).await;
    assert_eq!(kinds(&inbox), ["decision"]);
    assert_eq!(
        inbox["items"][0]["sentence"],
        "pat rejected it; the shares stay as they were. Their comment: \u{201c}not this quarter\u{201d}"
    );

    // Reading clears bob's count; the notifications stay, read.
    let (status, _) = call(&live, "/api/inbox/read", Some(&bob)).await;
    assert_eq!(status, 200);
    let (_, counts) = call(&live, "/api/nav/counts", Some(&bob)).await;
    assert_eq!(counts["unread"], 0);
    let (_, inbox) = call(&live, "/api/inbox", Some(&bob)).await;
    assert_eq!(inbox["unread"], 0);
    assert_eq!(kinds(&inbox).len(), 2);
    assert!(inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["unread"] == false));

    // Signed out: no inbox, and the header's counts are zero.
    let (status, _) = call(&live, "/api/inbox", None).await;
    assert_eq!(status, 401);
    let (status, _) = call(&live, "/api/inbox/read", None).await;
    assert_eq!(status, 401);
    let (status, counts) = call(&live, "/api/nav/counts", None).await;
    assert_eq!(
        (status, counts),
        (200, json!({ "awaiting": 0, "unread": 0 }))
    );
}

#[tokio::test]
async fn a_request_for_one_cluster_alone_says_so_in_the_inbox_and_the_webhook_message() {
    let mut live = Live::start().await;
    live.add_agent_in("east-1", 1, "east").await;
    live.add_agent_in("west-1", 1, "west").await;
    let now = live.runtime.now();
    let mut db = live.app.pool.acquire().await.unwrap();
    server::webhook::events::start_from_now(&mut db, now)
        .await
        .unwrap();
    drop(db);
    let (status, request) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            json!({ "node": "ai", "shares": { "ai/olmo": 1.0, "ai/molmo": 3.0 },
                    "justification": "molmo's season on west", "cluster": "west" }),
        )
        .await;
    assert_eq!(status, 201, "{request}");
    let id = request["id"].as_i64().unwrap();
    let title = format!("Change request #{id} on ai on cluster west only");

    let pat = live.app.sign_in("pat", "long enough 1").await;
    let (_, inbox) = call(&live, "/api/inbox", Some(&pat)).await;
    assert_eq!(inbox["items"][0]["title"], title.as_str(), "{inbox}");
    let text = server::webhook::events::collect_now(&live.app.pool, now)
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        text.contains(&format!("{title} waits for a decision")),
        "{text}"
    );

    let (status, _) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/reject"),
            json!({ "comment": "not this quarter" }),
        )
        .await;
    assert_eq!(status, 200);
    let ada = live.app.sign_in("ada", "long enough 1").await;
    let (_, inbox) = call(&live, "/api/inbox", Some(&ada)).await;
    assert_eq!(kinds(&inbox), ["decision"], "{inbox}");
    assert_eq!(inbox["items"][0]["title"], title.as_str(), "{inbox}");
    // Decisions are sent once a few seconds have passed (a request decided at once is told once).
    let later = live.runtime.now() + 10;
    let text = server::webhook::events::collect_now(&live.app.pool, later)
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        text.contains(&format!("{title} (proposed by ada): pat rejected it")),
        "{text}"
    );
}
