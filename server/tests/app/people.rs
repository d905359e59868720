//! People in the tree through the JSON API: owners add and remove members of the projects in
//! their subtree and owners of the nodes below their own; others get 403; each change is kept.

use crate::live::{job, Live};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn delete(live: &Live, who: &str, path: &str) -> (StatusCode, Value) {
    let response = live
        .http
        .delete(format!("{}{path}", live.url))
        .bearer_auth(live.token(who).await)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn grants(live: &Live, table: &str) -> Vec<(String, String)> {
    sqlx::query_as(&format!(
        "select b.path, u.username from {table} g join budget_node b on b.budget_node_id = g.budget_node_id
         join \"user\" u on u.user_id = g.user_id order by 1, 2"
    ))
    .fetch_all(&live.app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_owner_adds_a_member_who_can_then_submit_and_removes_them_again() {
    let mut live = Live::start().await;
    live.add_agent("n1", 1).await;
    live.app
        .create_user("cy", "researcher", "long enough 1")
        .await;
    // Not a member of ai/olmo yet: refused.
    let (status, refused) = live
        .post(
            "cy",
            "/api/v1/workloads",
            job("ai/olmo", "try", "true", 1, 60, true),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "project", "{refused}");

    let (status, people) = live
        .post(
            "pat",
            "/api/v1/tree/members",
            json!({ "path": "ai/olmo", "username": "cy" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{people}");
    assert_eq!(people["members"], json!(["ada", "cy"]));
    assert_eq!(people["history"][0]["username"], "cy");
    assert_eq!(people["history"][0]["by"], "pat");
    assert_eq!(people["history"][0]["added"], true);
    assert_eq!(people["history"][0]["kind"], "member");
    live.submit("cy", job("ai/olmo", "try", "true", 1, 60, true))
        .await;

    let (status, people) = delete(
        &live,
        "pat",
        "/api/v1/tree/members?path=ai/olmo&username=cy",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{people}");
    assert_eq!(people["members"], json!(["ada"]));
    assert_eq!(people["history"][0]["added"], false);
    let (status, refused) = live
        .post(
            "cy",
            "/api/v1/workloads",
            job("ai/olmo", "again", "true", 1, 60, true),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "no longer a member: {refused}"
    );
}

#[tokio::test]
async fn owners_are_managed_from_above_and_everyone_else_is_refused_with_nothing_changed() {
    let live = Live::start().await;
    let before = (
        grants(&live, "budget_member").await,
        grants(&live, "budget_owner").await,
    );
    // ada is a member, not an owner; pat owns ai but not its own ownership; bob nothing here.
    for (who, table, path) in [
        ("ada", "members", "ai/olmo"),
        ("ada", "owners", "ai/olmo"),
        ("bob", "members", "ai/olmo"),
        ("pat", "owners", "ai"),
        ("pat", "owners", ""),
    ] {
        let (status, body) = live
            .post(
                who,
                &format!("/api/v1/tree/{table}"),
                json!({ "path": path, "username": "bob" }),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{who} {table} {path}: {body}"
        );
        assert!(
            body["error"].as_str().unwrap().starts_with("Only "),
            "{body}"
        );
        let (status, _) = delete(
            &live,
            who,
            &format!("/api/v1/tree/{table}?path={path}&username=ada"),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{who} removing from {table} {path}"
        );
    }
    // Bad input, named.
    for (table, body, field, status) in [
        (
            "members",
            json!({ "path": "ai/nowhere", "username": "bob" }),
            "path",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "members",
            json!({ "path": "ai", "username": "bob" }),
            "path",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "members",
            json!({ "path": "ai/olmo", "username": "nobody" }),
            "username",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "members",
            json!({ "path": "ai/olmo", "username": "ada" }),
            "username",
            StatusCode::CONFLICT,
        ),
        (
            "owners",
            json!({ "path": "ai/olmo", "username": "" }),
            "username",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (got, answer) = live
            .post("pat", &format!("/api/v1/tree/{table}"), body.clone())
            .await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["field"], field, "{body}: {answer}");
    }
    let (status, answer) = delete(
        &live,
        "pat",
        "/api/v1/tree/members?path=ai/olmo&username=bob",
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "bob is not a member there: {answer}"
    );
    assert_eq!(
        (
            grants(&live, "budget_member").await,
            grants(&live, "budget_owner").await
        ),
        before,
        "nothing changed"
    );

    // pat owns ai: may name an owner of ai/olmo, who then decides nothing above it.
    let (status, people) = live
        .post(
            "pat",
            "/api/v1/tree/owners",
            json!({ "path": "ai/olmo", "username": "ada" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{people}");
    assert_eq!(people["owners"], json!(["ada"]));
    // The admin (root) names owners anywhere, the root's included.
    let (status, people) = live
        .post(
            "root",
            "/api/v1/tree/owners",
            json!({ "path": "ai", "username": "bob" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{people}");
    assert_eq!(people["owners"], json!(["bob", "pat"]));
    let (status, people) = delete(
        &live,
        "bob",
        "/api/v1/tree/owners?path=ai/olmo&username=ada",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "bob now owns ai: {people}");
    assert_eq!(people["owners"], json!([]));
    let history: Vec<(String, i64, String, Option<String>)> = sqlx::query_as(
        "select c.grant_kind, c.added, u.username, b.username from grant_change c
         join \"user\" u on u.user_id = c.user_id left join \"user\" b on b.user_id = c.changed_by
         where c.changed_by is not null order by c.grant_change_id",
    )
    .fetch_all(&live.app.pool)
    .await
    .unwrap();
    assert_eq!(
        history,
        [
            (
                "owner".to_string(),
                1,
                "ada".to_string(),
                Some("pat".to_string())
            ),
            (
                "owner".to_string(),
                1,
                "bob".to_string(),
                Some("root".to_string())
            ),
            (
                "owner".to_string(),
                0,
                "ada".to_string(),
                Some("bob".to_string())
            ),
        ]
    );
}

#[tokio::test]
async fn an_import_over_a_tree_records_the_people_it_changed_as_an_admins_import() {
    let live = Live::start().await;
    let org = server::budget::org_file::OrgFile::parse(
        "[shares]\n\"ai\" = 1\n\"ai/olmo\" = 3\n\"ai/molmo\" = 1\n\n[members]\n\"ai/olmo\" = [\"bob\"]\n",
    )
    .unwrap();
    server::budget::import::import_org(&live.app.pool, &org, crate::support::now())
        .await
        .unwrap();
    let (status, people) = live.get("pat", "/api/v1/tree/people?path=ai/olmo").await;
    assert_eq!(status, StatusCode::OK, "{people}");
    assert_eq!(people["members"], json!(["bob"]));
    let lines: Vec<(bool, String, Value)> = people["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["added"].as_bool().unwrap(),
                c["username"].as_str().unwrap().to_string(),
                c["by"].clone(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (false, "ada".into(), Value::Null),
            (true, "bob".into(), Value::Null),
            (true, "ada".into(), Value::Null),
        ],
        "the first import, then the second's change, newest first (either order within it)"
    );
}

/// Proposes new shares for ai's children as `who`: the status and the request.
async fn propose(live: &Live, who: &str, shares: Value) -> (StatusCode, Value) {
    let body = json!({ "node": "ai", "shares": shares, "justification": "season" });
    live.post(who, "/api/v1/change-requests", body).await
}

#[tokio::test]
async fn a_proposer_who_has_left_the_subtree_may_not_rebase_their_stale_request() {
    let live = Live::start().await;
    let (_, stale) = propose(&live, "bob", json!({ "ai/olmo": 1, "ai/molmo": 3 })).await;
    let (_, first) = propose(&live, "ada", json!({ "ai/olmo": 5, "ai/molmo": 5 })).await;
    let approve = format!("/api/v1/change-requests/{}/approve", first["id"]);
    let (status, body) = live.post("pat", &approve, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // bob leaves ai/molmo, his only place under ai.
    let leave = "/api/v1/tree/members?path=ai/molmo&username=bob";
    assert_eq!(delete(&live, "pat", leave).await.0, StatusCode::OK);

    let rebase = format!("/api/v1/change-requests/{}/rebase", stale["id"]);
    let (status, body) = live.post("bob", &rebase, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (_, pending) = live
        .get("root", "/api/v1/change-requests?state=pending")
        .await;
    let ids: Vec<&Value> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&stale["id"]], "nothing new was recorded: {pending}");
    let (_, old) = live
        .get("root", &format!("/api/v1/change-requests/{}", stale["id"]))
        .await;
    assert_eq!(old["state"], "stale", "and the old one is left as it was");
}

#[tokio::test]
async fn a_member_of_a_project_that_was_removed_may_no_longer_propose_above_it() {
    let live = Live::start().await;
    // ai/olmo is removed (left out of ai's new shares); ada was a member of it alone.
    let (status, removal) = propose(&live, "pat", json!({ "ai/molmo": 1 })).await;
    assert_eq!(status, StatusCode::CREATED, "{removal}");
    let approve = format!("/api/v1/change-requests/{}/approve", removal["id"]);
    let (status, body) = live.post("root", &approve, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "applied", "{body}");

    let (status, body) = propose(&live, "ada", json!({ "ai/molmo": 2 })).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // bob, still a member of ai/molmo, may.
    let (status, body) = propose(&live, "bob", json!({ "ai/molmo": 2 })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
