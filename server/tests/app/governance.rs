//! Budget change requests through the JSON API: every rule of DESIGN §3.

use crate::live::Live;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

fn proposal(olmo: f64, molmo: f64) -> Value {
    json!({ "node": "ai", "shares": { "ai/olmo": olmo, "ai/molmo": molmo }, "justification": "season", "effective_at": null })
}

async fn propose(live: &Live, who: &str, body: Value) -> i64 {
    let (status, request) = live.post(who, "/api/v1/change-requests", body).await;
    assert_eq!(status, StatusCode::CREATED, "{request}");
    assert_eq!(request["state"], "pending");
    request["id"].as_i64().unwrap()
}

async fn approve_as(live: &Live, who: &str, id: i64, body: Value) -> (StatusCode, Value) {
    live.post(who, &format!("/api/v1/change-requests/{id}/approve"), body)
        .await
}

async fn fraction(live: &Live, path: &str) -> f64 {
    let tree = live.get("ada", "/api/v1/tree").await.1;
    tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["path"] == path)
        .unwrap()["fraction"]
        .as_f64()
        .unwrap()
}

#[tokio::test]
async fn a_researcher_proposes_and_an_owner_approves_and_the_tree_changes() {
    let live = Live::start().await;
    let id = propose(&live, "ada", proposal(1.0, 1.0)).await;
    for who in ["ada", "bob"] {
        let (status, body) = approve_as(&live, who, id, json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{who}: {body}");
    }
    assert_eq!(fraction(&live, "ai/olmo").await, 0.75);
    let (status, body) = approve_as(&live, "pat", id, json!({ "comment": "fair" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "applied");
    assert_eq!(body["decided_by"], "pat");
    assert_eq!(fraction(&live, "ai/olmo").await, 0.5);
    let history = live.get("ada", "/api/v1/change-requests?node=ai").await.1;
    let item = &history[0]["items"][0];
    assert_eq!(
        (
            item["child"].as_str(),
            item["old_share"].as_f64(),
            item["new_share"].as_f64()
        ),
        (Some("molmo"), Some(1.0), Some(1.0))
    );
}

#[tokio::test]
async fn an_owners_own_proposal_needs_another_owner_or_an_owner_of_the_parent() {
    let live = Live::start().await;
    let id = propose(&live, "pat", proposal(2.0, 1.0)).await;
    let (status, body) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = live
        .post(
            "root",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_request_based_on_older_shares_is_stale_and_refused_with_409() {
    let live = Live::start().await;
    let first = propose(&live, "ada", proposal(1.0, 1.0)).await;
    let second = propose(&live, "bob", proposal(1.0, 3.0)).await;
    let (status, _) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{first}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{second}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        live.get("pat", &format!("/api/v1/change-requests/{second}"))
            .await
            .1["state"],
        "stale"
    );
    assert_eq!(
        fraction(&live, "ai/olmo").await,
        0.5,
        "the stale shares were not applied"
    );
}

#[tokio::test]
async fn a_scheduled_request_applies_at_its_time() {
    let live = Live::start().await;
    let at = crate::support::now() + 2;
    let mut body = proposal(1.0, 3.0);
    body["effective_at"] = json!(at);
    let id = propose(&live, "ada", body).await;
    let (status, decided) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(decided["state"], "scheduled");
    assert_eq!(
        fraction(&live, "ai/olmo").await,
        0.75,
        "not before its time"
    );
    for _ in 0..60 {
        if live
            .get("pat", &format!("/api/v1/change-requests/{id}"))
            .await
            .1["state"]
            == "applied"
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(fraction(&live, "ai/olmo").await, 0.25);
}

#[tokio::test]
async fn invalid_proposals_are_refused_naming_the_field_and_nothing_is_written() {
    let live = Live::start().await;
    let cases = [
        (
            json!({ "node": "ai", "shares": { "ai/olmo": -1, "ai/molmo": 1 }, "justification": "x" }),
            "shares",
        ),
        (
            json!({ "node": "ai", "shares": { "ai/olmo": 0, "ai/molmo": 0 }, "justification": "x" }),
            "shares",
        ),
        (
            json!({ "node": "ai", "shares": { "ai/Bad Name": 1, "ai/molmo": 1, "ai/olmo": 1 }, "justification": "x" }),
            "shares",
        ),
        (
            json!({ "node": "ai", "shares": { "ai/olmo": 1, "ai/molmo": 1 }, "justification": " " }),
            "justification",
        ),
        (
            json!({ "node": "nowhere", "shares": { "nowhere/x": 1 }, "justification": "x" }),
            "node",
        ),
        (
            json!({ "node": "ai", "shares": { "ai/olmo": 1, "ai/molmo": 1 }, "justification": "x", "effective_at": 1 }),
            "effective_at",
        ),
    ];
    for (body, field) in cases {
        let (status, error) = live
            .post("ada", "/api/v1/change-requests", body.clone())
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {error}");
        assert_eq!(error["field"], field, "{body} → {error}");
    }
    let count: i64 = sqlx::query_scalar("select count(*) from change_request")
        .fetch_one(&live.app.pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[tokio::test]
async fn only_people_in_the_subtree_may_propose() {
    let live = Live::start().await;
    let body = json!({ "node": "ai/olmo", "shares": { "ai/olmo/x": 1 }, "justification": "split" });
    let (status, _) = live
        .post("bob", "/api/v1/change-requests", body.clone())
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "bob is a member of ai/molmo, not ai/olmo"
    );
    let (status, _) = live.post("ada", "/api/v1/change-requests", body).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn previewing_impact_replays_recent_submissions_with_both_share_sets() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    for i in 0..3 {
        live.submit(
            "ada",
            crate::live::job("ai/olmo", &format!("o{i}"), "sleep 1", 2, 900, true),
        )
        .await;
        live.submit(
            "bob",
            crate::live::job("ai/molmo", &format!("m{i}"), "sleep 1", 2, 900, true),
        )
        .await;
    }
    let id = propose(&live, "bob", proposal(1.0, 3.0)).await;
    let (status, impact) = live
        .get("pat", &format!("/api/v1/change-requests/{id}/impact"))
        .await;
    assert_eq!(status, StatusCode::OK, "{impact}");
    assert_eq!(impact["workloads"], 6);
    assert_eq!(impact["gpus"], 4);
    let paths: Vec<&str> = impact["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["ai/molmo", "ai/olmo"]);
    for row in impact["rows"].as_array().unwrap() {
        assert!(
            row["delivered_now_gpu_h"].is_f64() && row["delivered_proposed_gpu_h"].is_f64(),
            "{row}"
        );
        assert!(row["p90_wait_now_s"].is_i64(), "{row}");
    }
}

/// Approves request `id` as `who` and expects it applied.
async fn approve(live: &Live, who: &str, id: i64) {
    let (status, body) = approve_as(live, who, id, json!({})).await;
    assert_eq!(status, StatusCode::OK, "request {id}: {body}");
    assert_eq!(body["state"], "applied", "{body}");
}

#[tokio::test]
async fn renaming_a_node_with_an_underscore_leaves_a_sibling_that_only_looks_alike_in_place() {
    let live = Live::start().await;
    // `_` matches any one character in a SQL LIKE pattern: `ai/a_b` against `ai/axb`. Adding
    // children beside existing ones also mixes missing and present old shares in one request.
    let grow = json!({ "node": "ai", "shares": { "ai/olmo": 3, "ai/molmo": 1, "ai/a_b": 1, "ai/axb": 1 }, "justification": "new teams" });
    let id = propose(&live, "pat", grow).await;
    approve(&live, "root", id).await;
    for parent in ["ai/a_b", "ai/axb"] {
        let split = json!({ "node": parent, "shares": { format!("{parent}/p"): 1 }, "justification": "a project" });
        let id = propose(&live, "pat", split).await;
        approve(&live, "root", id).await;
    }
    let rename = json!({ "node": "ai", "shares": { "ai/olmo": 3, "ai/molmo": 1, "ai/a_b": 1, "ai/axb": 1 }, "renames": { "ai/a_b": "c" }, "justification": "rename" });
    let id = propose(&live, "pat", rename).await;
    approve(&live, "root", id).await;

    let tree = live.get("ada", "/api/v1/tree").await.1;
    let mut paths: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .filter(|p| p.starts_with("ai/") && !p.contains("olmo"))
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["ai/axb", "ai/axb/p", "ai/c", "ai/c/p"]);
}

#[tokio::test]
async fn a_proposer_withdraws_a_waiting_request_which_no_one_can_then_approve_and_no_one_else_may_withdraw(
) {
    let live = Live::start().await;
    let id = propose(&live, "ada", proposal(1.0, 1.0)).await;
    let withdraw = format!("/api/v1/change-requests/{id}/withdraw");
    for who in ["bob", "pat", "root"] {
        let (status, body) = live.post(who, &withdraw, json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{who}: {body}");
    }
    let listed = live
        .get("ada", &format!("/api/v1/change-requests/{id}"))
        .await
        .1;
    assert_eq!(
        (
            listed["can_withdraw"].as_bool(),
            listed["can_rebase"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let (status, body) = live.post("ada", &withdraw, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "withdrawn");
    assert_eq!(body["decided_by"], "ada");
    assert_eq!(body["can_withdraw"], false);
    let (status, body) = approve_as(&live, "pat", id, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = live.post("ada", &withdraw, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "withdrawn twice: {body}");
    assert_eq!(fraction(&live, "ai/olmo").await, 0.75, "nothing applied");
}

#[tokio::test]
async fn a_stale_request_is_rebased_by_its_proposer_onto_todays_shares_and_the_old_one_points_to_the_new(
) {
    let live = Live::start().await;
    let stale = propose(&live, "bob", proposal(1.0, 3.0)).await;
    let rebase = format!("/api/v1/change-requests/{stale}/rebase");
    let (status, body) = live.post("bob", &rebase, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "not stale yet: {body}");
    // Another change to the same shares lands first.
    let first = propose(&live, "ada", proposal(5.0, 5.0)).await;
    let (status, _) = approve_as(&live, "pat", first, json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let seen = live
        .get("bob", &format!("/api/v1/change-requests/{stale}"))
        .await
        .1;
    assert_eq!(seen["state"], "stale");
    assert_eq!(seen["can_rebase"], true);
    let (status, body) = live.post("ada", &rebase, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "only its proposer: {body}");

    let (status, new) = live.post("bob", &rebase, json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{new}");
    assert_eq!(new["state"], "pending");
    assert_eq!(new["justification"], "season");
    let shares: Vec<(String, Option<f64>, Option<f64>)> = new["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["child"].as_str().unwrap().to_string(),
                i["old_share"].as_f64(),
                i["new_share"].as_f64(),
            )
        })
        .collect();
    assert_eq!(
        shares,
        [
            ("molmo".to_string(), Some(5.0), Some(3.0)),
            ("olmo".to_string(), Some(5.0), Some(1.0))
        ],
        "the same target shares, now from today's 5 and 5"
    );
    let old = live
        .get("bob", &format!("/api/v1/change-requests/{stale}"))
        .await
        .1;
    assert_eq!(old["state"], "withdrawn");
    assert_eq!(old["replaced_by"], new["id"]);
    let (status, body) = approve_as(&live, "pat", new["id"].as_i64().unwrap(), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(fraction(&live, "ai/olmo").await, 0.25);
}

#[tokio::test]
async fn the_navigation_counts_the_requests_waiting_for_each_person_and_nobody_signed_out() {
    let live = Live::start().await;
    let count = |cookie: Option<String>| {
        let app = &live.app;
        async move {
            let response = app
                .post_form("/api/nav/counts", &[], cookie.as_deref())
                .await;
            assert_eq!(response.status, 200, "{}", response.body);
            response.json()["awaiting"].as_u64().unwrap()
        }
    };
    let id = propose(&live, "ada", proposal(1.0, 1.0)).await;
    let pat = live.app.sign_in("pat", "long enough 1").await;
    let ada = live.app.sign_in("ada", "long enough 1").await;
    assert_eq!(count(Some(pat.clone())).await, 1, "pat owns ai");
    assert_eq!(count(Some(ada)).await, 0, "the proposer does not decide");
    assert_eq!(count(None).await, 0, "the sign-in page asks too");
    let (status, _) = approve_as(&live, "pat", id, json!({ "comment": "ok" })).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(Some(pat)).await, 0, "decided");
}

#[tokio::test]
async fn deciding_takes_owning_the_node_or_above_whatever_the_role() {
    let live = Live::start().await;
    live.app
        .create_user("lee", "leadership", "long enough 1")
        .await;
    live.app.create_user("adm", "admin", "long enough 1").await;
    let id = propose(&live, "ada", proposal(1.0, 1.0)).await;
    for who in ["lee", "adm", "bob"] {
        let (status, body) = approve_as(&live, who, id, json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{who} owns nothing: {body}");
        let reject = format!("/api/v1/change-requests/{id}/reject");
        let (status, body) = live.post(who, &reject, json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{who} owns nothing: {body}");
    }
    assert_eq!(fraction(&live, "ai/olmo").await, 0.75, "nothing applied");
    approve(&live, "pat", id).await;
    assert_eq!(fraction(&live, "ai/olmo").await, 0.5);
}
