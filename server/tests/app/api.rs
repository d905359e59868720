//! The JSON API: validation and authorization per role.

use crate::live::{job, Live};
use reqwest::StatusCode;
use serde_json::json;

async fn workload_count(live: &Live) -> i64 {
    sqlx::query_scalar("select count(*) from workload")
        .fetch_one(&live.app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn invalid_submissions_name_the_field_and_write_nothing() {
    let mut live = Live::start().await;
    live.add_agent("n1", 8).await;
    let cases = [
        (job("ai/nowhere", "x", "true", 1, 0, true), "project"),
        (job("ai", "x", "true", 1, 0, true), "project"),
        (job("ai/molmo", "x", "true", 1, 0, true), "project"),
        (job("ai/olmo", "x", "true", 9, 0, true), "gpus"),
        (
            job("ai/olmo", "x", "true", 1, 8 * 3600 + 1, true),
            "min_runtime_s",
        ),
        (job("ai/olmo", "x", "   ", 1, 0, true), "command"),
        (
            json!({ "project": "ai/olmo", "name": "x", "command": "true" }),
            "gpus",
        ),
    ];
    for (body, field) in cases {
        let (status, error) = live.post("ada", "/api/v1/workloads", body.clone()).await;
        assert!(status.is_client_error(), "{body} → {status}");
        assert_eq!(error["field"], field, "{body} → {error}");
        assert!(error["error"].as_str().unwrap().len() > 10);
    }
    assert_eq!(workload_count(&live).await, 0);
}

#[tokio::test]
async fn the_api_requires_a_valid_token() {
    let live = Live::start().await;
    let anonymous = live
        .http
        .get(format!("{}/api/v1/workloads", live.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let forged = live
        .http
        .get(format!("{}/api/v1/workloads", live.url))
        .bearer_auth("hgt_forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn only_admins_change_node_states() {
    let mut live = Live::start().await;
    live.add_agent("n1", 2).await;
    for user in ["ada", "pat"] {
        let (status, _) = live.post(user, "/api/v1/nodes/n1/cordon", json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let (status, body) = live
        .post("root", "/api/v1/nodes/n1/cordon", json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["state"], "cordoned");
    let (status, body) = live
        .post("root", "/api/v1/nodes/n1/explode", json!({}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

#[tokio::test]
async fn the_tree_shows_shares_fractions_owners_and_ratios() {
    let live = Live::start().await;
    let (status, tree) = live.get("ada", "/api/v1/tree").await;
    assert_eq!(status, StatusCode::OK);
    let nodes = tree["nodes"].as_array().unwrap();
    let olmo = nodes.iter().find(|n| n["path"] == "ai/olmo").unwrap();
    assert_eq!(olmo["fraction"], 0.75);
    assert_eq!(olmo["leaf"], true);
    let ai = nodes.iter().find(|n| n["path"] == "ai").unwrap();
    assert_eq!(ai["owners"], json!(["pat"]));
}

/// A node of two GPUs, both held by ai/olmo's protected "blocker" for an hour.
async fn both_gpus_held_by_olmo(live: &mut Live) {
    live.add_agent("n1", 2).await;
    let blocker = live
        .submit("ada", job("ai/olmo", "blocker", "sleep 30", 2, 3600, true))
        .await;
    live.wait_for_state(blocker, "running").await;
}

#[tokio::test]
async fn a_queued_workload_explains_its_position_and_path() {
    let mut live = Live::start().await;
    both_gpus_held_by_olmo(&mut live).await;
    let waiting = live
        .submit("bob", job("ai/molmo", "waiting", "true", 2, 900, true))
        .await;
    let detail = live.wait_for_state(waiting, "queued").await;
    let queue = &detail["queue"];
    assert_eq!(queue["position"], 1, "{detail}");
    assert_eq!(queue["path"][1]["path"], "ai/molmo");
    assert_eq!(queue["waiting_for"]["kind"], "capacity", "{queue}");
    // It names the workload holding the GPUs it needs.
    let holder = &queue["waiting_for"]["holders"][0];
    assert_eq!(
        (
            holder["name"].as_str(),
            holder["project"].as_str(),
            holder["gpus"].as_u64()
        ),
        (Some("blocker"), Some("ai/olmo"), Some(2)),
        "{queue}"
    );
    // Each level names the sibling that goes first, unless it is this one (which of olmo and
    // molmo ranks first depends on whether the blocker's first second is booked yet).
    for step in queue["path"].as_array().unwrap() {
        let first = step["sibling_rank"] == 1;
        assert_eq!(step["ahead"].is_null(), first, "{step}");
        if !first {
            assert_eq!(step["ahead"]["path"], "ai/olmo", "{step}");
        }
        assert!(step["recent_ratio"].is_number(), "{step}");
    }
}

#[tokio::test]
async fn free_work_that_cannot_resume_is_queued_after_free_work_that_can_and_says_why() {
    let mut live = Live::start().await;
    both_gpus_held_by_olmo(&mut live).await;
    // molmo has used nothing and ranks first, so by rank alone its sweep would go first.
    let final_sweep = live
        .submit("bob", job("ai/molmo", "final-sweep", "true", 1, 0, false))
        .await;
    let resumable_sweep = live
        .submit("ada", job("ai/olmo", "resumable-sweep", "true", 1, 0, true))
        .await;
    live.wait_for_state(final_sweep, "queued").await;
    let (rows, total) = server::workloads::service::queue(&live.app.pool, &live.runtime, 50, None)
        .await
        .unwrap();
    let order: Vec<(i64, usize)> = rows.iter().map(|r| (r.workload.id, r.position)).collect();
    assert_eq!(total, 2);
    assert_eq!(order, [(resumable_sweep, 1), (final_sweep, 2)]);
    let (_, detail) = live
        .get("bob", &format!("/api/v1/workloads/{final_sweep}"))
        .await;
    let queue = &detail["queue"];
    assert_eq!(queue["position"], 2, "{detail}");
    assert_eq!(queue["waiting_for"]["kind"], "idle-only", "{queue}");
    assert_eq!(queue["waiting_for"]["resumable_ahead"], 1, "{queue}");
}

#[tokio::test]
async fn a_finished_workload_says_how_long_it_ran_and_what_it_was_charged() {
    let mut live = Live::start().await;
    live.add_agent("n1", 2).await;
    let id = live
        .submit("ada", job("ai/olmo", "short", "sleep 2", 2, 900, true))
        .await;
    let detail = live.wait_for_state(id, "succeeded").await;
    assert_eq!(detail["runs"], 1, "{detail}");
    let ran = detail["ran_s"].as_i64().unwrap();
    assert!((1..=60).contains(&ran), "sleep 2 ran {ran} s");
    let charged = detail["charged_gpu_h"].as_f64().unwrap();
    assert!(
        (charged - 2.0 * ran as f64 / 3600.0).abs() < 1e-9,
        "2 GPUs for {ran} s, charged {charged} GPU-h"
    );
}

/// Hostile JSON bodies (truncated, mistyped, huge, deeply nested, byte-flipped mutations of a
/// valid submission): each gets a client error or, if it happens to be valid, a 201; never a
/// server error, and only the accepted ones are written.
#[tokio::test]
async fn hostile_json_bodies_get_client_errors_and_write_only_what_was_accepted() {
    let mut live = Live::start().await;
    live.add_agent("n1", 8).await;
    let valid = r#"{"project":"ai/olmo","name":"x","command":"true","gpus":1,"min_runtime_s":0,"resumable":true}"#;
    let tokens = [
        "null",
        "-1",
        "1e309",
        "18446744073709551616",
        "\"\\u0000\"",
        "{}",
        "[]",
        "true",
        ",",
        ":",
        "\"gpus\":",
        "\"𝄞𝄞𝄞\"",
        "-0",
        "0.5",
        "\"\\ud800\"",
        "{\"a\":",
        "]]",
        "\"priority\":999999",
    ];
    let mut bodies: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"\xff\xfe\x00".to_vec(),
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
        format!(
            r#"{{"project":"ai/olmo","name":"{}","command":"true","gpus":1,"min_runtime_s":0}}"#,
            "n".repeat(1_500_000)
        )
        .into_bytes(),
        valid
            .replace("\"gpus\":1", "\"gpus\":1,\"gpus\":8")
            .into_bytes(),
    ];
    // A fixed-seed xorshift: the same mutations on every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    for _ in 0..300 {
        let mut body = valid.as_bytes().to_vec();
        for _ in 0..1 + next(3) {
            let at = next(body.len() + 1);
            match next(4) {
                0 => body.truncate(at),
                1 if !body.is_empty() => {
                    let i = at.min(body.len() - 1);
                    body[i] ^= 1 << next(8);
                }
                _ => {
                    let token = tokens[next(tokens.len())].as_bytes();
                    body.splice(at..at, token.iter().copied());
                }
            }
        }
        bodies.push(body);
    }
    let token = live.token("ada").await;
    let mut accepted = 0;
    for body in &bodies {
        let response = live
            .http
            .post(format!("{}/api/v1/workloads", live.url))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = response.status();
        let shown = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        assert!(
            status.is_client_error() || status == StatusCode::CREATED,
            "{shown} → {status}"
        );
        if status == StatusCode::CREATED {
            accepted += 1;
        } else {
            let text = response.text().await.unwrap();
            assert!(!text.is_empty(), "{shown} → {status} with an empty body");
        }
    }
    assert_eq!(workload_count(&live).await, accepted);
}

/// Authenticating is a read: a token used within the last minute is not written again, so API
/// calls are answered while another connection holds SQLite's single write lock (a scheduler pass
/// starved of CPU once held it past the 10 s busy timeout, and every call failed with a 500).
#[tokio::test]
async fn api_calls_with_a_recently_used_token_need_no_write_lock() {
    if crate::support::postgres_url().is_some() {
        eprintln!("skipped on PostgreSQL: there is no database-wide write lock to hold");
        return;
    }
    let live = Live::start().await;
    let token = live.token("ada").await;
    let get = || async {
        live.http
            .get(format!("{}/api/v1/workloads?mine=true", live.url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(
        get().await,
        StatusCode::OK,
        "the first call records the use"
    );
    let used_at = || async {
        sqlx::query_scalar::<_, Option<i64>>("select last_used_at from api_token")
            .fetch_one(&live.app.pool)
            .await
            .unwrap()
    };
    let first = used_at().await.expect("recorded");

    let mut writer = live.app.pool.acquire().await.unwrap();
    sqlx::query("begin immediate")
        .execute(&mut *writer)
        .await
        .unwrap();
    let status = get().await;
    sqlx::query("rollback").execute(&mut *writer).await.unwrap();
    // A write would have waited out the busy timeout and failed with "database is locked".
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        used_at().await,
        Some(first),
        "a use within the minute is not written"
    );

    // A use older than the precision is recorded again.
    sqlx::query("update api_token set last_used_at = last_used_at - 120")
        .execute(&live.app.pool)
        .await
        .unwrap();
    assert_eq!(get().await, StatusCode::OK);
    assert!(used_at().await.unwrap() >= first);
}

#[tokio::test]
async fn an_admin_removes_a_node_that_never_connected_but_not_one_that_did() {
    let mut live = Live::start().await;
    live.add_agent("n1", 2).await;
    server::nodes::service::register_node(&live.app.pool, "typo", None, crate::support::now())
        .await
        .unwrap();
    let delete = |who: &'static str, name: &'static str| {
        let live = &live;
        async move {
            let response = live
                .http
                .delete(format!("{}/api/v1/nodes/{name}", live.url))
                .bearer_auth(live.token(who).await)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.text().await.unwrap())
        }
    };
    assert_eq!(delete("ada", "typo").await.0, StatusCode::FORBIDDEN);
    let (status, body) = delete("root", "n1").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("has connected"), "{body}");
    assert_eq!(delete("root", "typo").await.0, StatusCode::NO_CONTENT);
    assert_eq!(delete("root", "typo").await.0, StatusCode::NOT_FOUND);
    let names: Vec<String> = live.get("root", "/api/v1/nodes").await.1["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["n1"]);
}
