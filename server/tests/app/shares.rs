//! A tree node's share history through the JSON API and its server function: every version, who
//! proposed and approved it, and the node's effective share over time.

use crate::live::{fast_config, Live};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A change request ada proposes and pat (an owner of ai) approves; its id.
async fn proposed_by_ada_approved_by_pat(live: &Live, request: Value) -> i64 {
    let (status, request) = live.post("ada", "/api/v1/change-requests", request).await;
    assert_eq!(status, StatusCode::CREATED, "{request}");
    let id = request["id"].as_i64().unwrap();
    let (status, body) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    id
}

#[tokio::test]
async fn a_nodes_share_history_names_who_proposed_and_approved_each_share_and_its_effective_share_over_time(
) {
    // A day after the tree was imported, so the change has a moment of its own.
    let at = crate::support::now() + 86_400;
    let live = Live::start_on(fast_config(), server::clock::Clock::fixed(at)).await;
    let id = proposed_by_ada_approved_by_pat(
        &live,
        json!({ "node": "ai", "shares": { "ai/olmo": 1.0, "ai/molmo": 1.0 }, "justification": "even split", "effective_at": null }),
    )
    .await;

    let (status, history) = live.get("bob", "/api/v1/tree/shares?path=ai/olmo").await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{history}");
    assert_eq!(versions[0]["share"], 3.0);
    assert_eq!(versions[0]["origin"], json!({ "kind": "import" }));
    assert_eq!(versions[0]["to"], at);
    assert_eq!(versions[1]["share"], 1.0);
    assert_eq!(versions[1]["from"], at);
    assert_eq!(versions[1]["to"], Value::Null);
    assert_eq!(
        versions[1]["origin"],
        json!({ "kind": "request", "id": id, "proposer": "ada", "decided_by": "pat", "justification": "even split" })
    );
    let fraction: Vec<(i64, f64)> = history["fraction"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    assert_eq!(fraction.len(), 2, "{history}");
    assert_eq!(fraction[0], (versions[0]["from"].as_i64().unwrap(), 0.75));
    assert_eq!(fraction[1], (at, 0.5));

    // The page's server function gives the same.
    let cookie = live.app.sign_in("bob", "long enough 1").await;
    let response = live
        .app
        .post_form("/api/budget/shares", &[("path", "ai/olmo")], Some(&cookie))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(response.json(), history);

    // The usage chart of ai marks the moment its children's shares changed.
    let (from, to) = ((at - 3_600).to_string(), (at + 3_600).to_string());
    let response = live
        .app
        .post_form(
            "/api/reports/series",
            &[
                ("node", "ai"),
                ("from", &from),
                ("to", &to),
                ("granularity", "hour"),
            ],
            Some(&cookie),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(
        response.json()["share_changes"],
        json!([
            { "at": at, "path": "ai/molmo", "share": 1.0 },
            { "at": at, "path": "ai/olmo", "share": 1.0 },
        ])
    );
}

#[tokio::test]
async fn a_share_history_of_no_node_or_of_the_cluster_is_refused_and_strangers_are_not_answered() {
    let live = Live::start().await;
    let (status, body) = live.get("bob", "/api/v1/tree/shares?path=ai/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "There is no node \"ai/nope\" in the tree.");
    let (status, body) = live.get("bob", "/api/v1/tree/shares?path=").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "path");
    let anonymous = crate::live::client()
        .get(format!("{}/api/v1/tree/shares?path=ai", live.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let response = live
        .app
        .post_form("/api/budget/shares", &[("path", "ai")], None)
        .await;
    assert_eq!(response.status, 401);
}

#[tokio::test]
async fn the_usage_chart_of_one_cluster_marks_the_shares_approved_for_it_alone_and_no_other_cluster_does(
) {
    let at = crate::support::now() + 86_400;
    let live = Live::start_on(fast_config(), server::clock::Clock::fixed(at)).await;
    for name in ["east", "west"] {
        sqlx::query("insert into cluster (name, created_at) values ($1, 0)")
            .bind(name)
            .execute(&live.app.pool)
            .await
            .unwrap();
    }
    proposed_by_ada_approved_by_pat(
        &live,
        json!({ "node": "ai", "shares": { "ai/olmo": 1.0, "ai/molmo": 3.0 }, "justification": "molmo's season on west", "cluster": "west" }),
    )
    .await;

    let cookie = live.app.sign_in("bob", "long enough 1").await;
    let (from, to) = ((at - 3_600).to_string(), (at + 3_600).to_string());
    for (cluster, marks) in [
        (
            "west",
            json!([
                { "at": at, "path": "ai/molmo", "share": 3.0 },
                { "at": at, "path": "ai/olmo", "share": 1.0 },
            ]),
        ),
        ("east", json!([])),
        ("", json!([])),
    ] {
        let response = live
            .app
            .post_form(
                "/api/reports/series",
                &[
                    ("node", "ai"),
                    ("cluster", cluster),
                    ("from", &from),
                    ("to", &to),
                    ("granularity", "hour"),
                ],
                Some(&cookie),
            )
            .await;
        assert_eq!(response.status, 200, "{}", response.body);
        assert_eq!(response.json()["share_changes"], marks, "on {cluster:?}");
        // The series says which cluster it is of (the chart's description names it).
        assert_eq!(response.json()["cluster"], cluster);
    }
}
