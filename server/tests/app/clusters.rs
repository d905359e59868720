//! Several clusters: each a pool of nodes with its own ledger and its own decision per pass.

use crate::live::{job, Live};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server::{db, runtime::snapshot};

fn with_cluster(mut body: Value, cluster: &str) -> Value {
    body["cluster"] = json!(cluster);
    body
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_workload_runs_on_the_cluster_it_names_and_is_charged_there_alone() {
    let mut live = Live::start().await;
    live.add_agent_in("east-1", 2, "east").await;
    live.add_agent_in("west-1", 2, "west").await;

    let (status, clusters) = live.get("ada", "/api/v1/clusters").await;
    assert_eq!(status, StatusCode::OK);
    // Signed out, neither the API nor the page's server function lists them.
    for (method, path) in [("GET", "/api/v1/clusters"), ("POST", "/api/clusters")] {
        let request = match method {
            "GET" => live.http.get(format!("{}{path}", live.url)),
            _ => live.http.post(format!("{}{path}", live.url)),
        };
        let anonymous = request.send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(names(&clusters, "clusters"), ["east", "west"]);
    assert_eq!(clusters["clusters"][0]["nodes"], 1);
    assert_eq!(clusters["clusters"][0]["gpus"], 2);
    assert_eq!(clusters["clusters"][0]["healthy_gpus"], 2);

    // With two clusters a submission must say which; an unknown one is refused; neither is kept.
    let long = job("ai/olmo", "train", "sleep 60", 2, 3600, true);
    let (status, refused) = live.post("ada", "/api/v1/workloads", long.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "cluster");
    assert!(
        refused["error"].as_str().unwrap().contains("east, west"),
        "{refused}"
    );
    let (status, refused) = live
        .post(
            "ada",
            "/api/v1/workloads",
            with_cluster(long.clone(), "north"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no cluster \"north\""),
        "{refused}"
    );
    // More GPUs than the named cluster has, though both together would hold it.
    let (status, refused) = live
        .post(
            "ada",
            "/api/v1/workloads",
            with_cluster(job("ai/olmo", "big", "true", 4, 900, true), "east"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("cluster \"east\""),
        "{refused}"
    );
    assert_eq!(live.get("root", "/api/v1/workloads").await.1, json!([]));

    // ada's project fills east; bob's fills west; a second east workload waits for east even
    // though it is of another project.
    let east = live.submit("ada", with_cluster(long.clone(), "east")).await;
    let west = live
        .submit(
            "bob",
            with_cluster(job("ai/molmo", "eval", "sleep 60", 2, 3600, true), "west"),
        )
        .await;
    let east_running = live.wait_for_state(east, "running").await;
    let west_running = live.wait_for_state(west, "running").await;
    assert_eq!(east_running["cluster"], "east");
    assert_eq!(
        east_running["placement"][0]["node"], "east-1",
        "{east_running}"
    );
    assert_eq!(
        west_running["placement"][0]["node"], "west-1",
        "{west_running}"
    );
    let waiting = live
        .submit(
            "bob",
            with_cluster(job("ai/molmo", "wait", "true", 1, 900, true), "east"),
        )
        .await;

    // The lists filter by cluster; the queue is each cluster's own.
    let (_, on_east) = live.get("root", "/api/v1/workloads?cluster=east").await;
    let mut ids: Vec<i64> = on_east
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [east, waiting]);
    let (status, refused) = live.get("root", "/api/v1/workloads?cluster=north").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "cluster");
    let (_, nodes) = live.get("root", "/api/v1/nodes?cluster=west").await;
    assert_eq!(names(&nodes, "nodes"), ["west-1"]);
    assert_eq!(nodes["nodes"][0]["cluster"], "west");
    let (rows, total) =
        server::workloads::service::queue(&live.app.pool, &live.runtime, 50, Some("east"))
            .await
            .unwrap();
    assert_eq!((rows.len(), total), (1, 1));
    assert_eq!((rows[0].workload.id, rows[0].position), (waiting, 1));
    let (rows, _) =
        server::workloads::service::queue(&live.app.pool, &live.runtime, 50, Some("west"))
            .await
            .unwrap();
    assert!(rows.is_empty(), "nothing waits on west");

    // Each cluster's ledger holds only what ran there: ai/olmo has used east and nothing of west,
    // so on west it ranks as a team that has used nothing.
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let now = live.runtime.now();
    let mut read = db::begin_read(&live.app.pool).await.unwrap();
    let snaps = snapshot::load(&mut read, &live.runtime.config(), now)
        .await
        .unwrap()
        .expect("a tree");
    read.rollback().await.unwrap();
    let usage_of = |cluster: &str, path: &str| {
        let snap = snaps.named(Some(cluster)).expect(cluster);
        let id = snap.tree.tree.find(path).expect(path);
        snap.engine.standings(now).usage(id)
    };
    assert!(usage_of("east", "ai/olmo") > 0.0);
    assert_eq!(usage_of("west", "ai/olmo"), 0.0);
    assert!(usage_of("west", "ai/molmo") > 0.0);
    assert_eq!(usage_of("east", "ai/molmo"), 0.0);
    let booked: Vec<(String, String)> = sqlx::query_as(
        "select distinct c.name, b.path from usage_hour u
         join cluster c on c.cluster_id = u.cluster_id
         join budget_node b on b.budget_node_id = u.budget_node_id
         where u.charged_gpu_s > 0 order by c.name, b.path",
    )
    .fetch_all(&live.app.pool)
    .await
    .unwrap();
    assert_eq!(
        booked,
        [
            ("east".to_string(), "ai/olmo".to_string()),
            ("west".to_string(), "ai/molmo".to_string())
        ]
    );

    // The review of today: each cluster's headline beside the total, and one cluster's alone.
    let day = now - now.rem_euclid(86_400);
    let period = format!("from={day}&to={}", day + 86_400);
    let (status, total) = live
        .get("root", &format!("/api/v1/reports/review?{period}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{total}");
    assert_eq!(total["cluster"], Value::Null);
    assert_eq!(names(&total, "clusters"), ["east", "west"]);
    let capacity = |r: &Value| r["headline"]["capacity_gpu_h"].as_f64().unwrap();
    let by_cluster: f64 = total["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(capacity)
        .sum();
    assert!((capacity(&total) - by_cluster).abs() < 1e-6, "{total}");
    let delivered = |r: &Value, path: &str| {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["path"] == path)
            .map(|row| row["delivered_gpu_h"].as_f64().unwrap())
            .unwrap()
    };
    let (status, east_review) = live
        .get(
            "root",
            &format!("/api/v1/reports/review?{period}&cluster=east"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{east_review}");
    assert_eq!(east_review["cluster"], "east");
    assert!(east_review["clusters"].as_array().unwrap().is_empty());
    assert!(delivered(&east_review, "ai/olmo") > 0.0);
    assert_eq!(delivered(&east_review, "ai/molmo"), 0.0);
    assert!(delivered(&total, "ai/molmo") > 0.0);
    let (status, refused) = live
        .get(
            "root",
            &format!("/api/v1/reports/review?{period}&cluster=north"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");

    // The tree's standings are per cluster too.
    let (_, tree) = live.get("root", "/api/v1/tree?cluster=west").await;
    let ratio_used = |tree: &Value, path: &str| {
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == path)
            .map(|n| n["usage_gpu_h"].as_f64().unwrap())
            .unwrap()
    };
    assert_eq!(ratio_used(&tree, "ai/olmo"), 0.0);
    assert!(ratio_used(&tree, "ai/molmo") > 0.0);
    let (_, tree) = live.get("root", "/api/v1/tree?cluster=east").await;
    assert!(ratio_used(&tree, "ai/olmo") > 0.0);
}

#[tokio::test]
async fn an_agent_started_for_another_cluster_is_refused_with_the_cluster_it_belongs_to() {
    let live = Live::start().await;
    let (node, token) = server::nodes::service::register_node(
        &live.app.pool,
        "gpu-9",
        Some("h100"),
        crate::support::now(),
    )
    .await
    .unwrap();
    assert_eq!(node.cluster, "h100");
    let sync = |cluster: &'static str| {
        live.http
            .post(format!("{}/api/agent/v1/sync", live.url))
            .bearer_auth(&token)
            .json(&json!({ "name": "gpu-9", "cluster": cluster, "gpus": 8 }))
            .send()
    };
    let response = sync("b200").await.unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("registered in cluster \"h100\", not \"b200\""),
        "{body}"
    );
    assert_eq!(sync("h100").await.unwrap().status(), StatusCode::OK);

    // A cluster name that does not read is refused when registering, and nothing is created.
    let refused = server::nodes::service::register_node(
        &live.app.pool,
        "gpu-10",
        Some("two words"),
        crate::support::now(),
    )
    .await;
    assert!(matches!(
        refused,
        Err(server::ServerError::Invalid {
            field: "cluster",
            ..
        })
    ));
    assert!(
        server::nodes::repo::find_node_by_name(&live.app.pool, "gpu-10")
            .await
            .unwrap()
            .is_none()
    );
}

/// The share of `path` among its siblings on `cluster` (empty: none named), as the Budget tree
/// shows it.
async fn of_parent(live: &Live, cluster: &str, path: &str) -> f64 {
    let (status, tree) = live
        .get("ada", &format!("/api/v1/tree?cluster={cluster}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{tree}");
    tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["path"] == path)
        .map(|n| n["of_parent"].as_f64().unwrap())
        .unwrap()
}

/// ai/molmo's `share_at_end` in a review of `cluster` alone from an hour ago to an hour ahead.
async fn share_at_end(live: &Live, cluster: &str, path: &str) -> f64 {
    let now = live.runtime.now();
    let (from, to) = (now - 3600, now + 3600);
    let (status, review) = live
        .get(
            "root",
            &format!("/api/v1/reports/review?from={from}&to={to}&cluster={cluster}"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{review}");
    let row = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("no {path} row: {review}"));
    row["share_at_end"].as_f64().unwrap()
}

/// Request `id`'s impact preview: the GPUs replayed, and ai/molmo's share of them now and
/// proposed.
async fn molmo_impact(live: &Live, id: i64) -> (i64, f64, f64) {
    let (status, impact) = live
        .get("pat", &format!("/api/v1/change-requests/{id}/impact"))
        .await;
    assert_eq!(status, StatusCode::OK, "{impact}");
    let row = impact["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/molmo")
        .cloned()
        .unwrap_or_else(|| panic!("no ai/molmo row: {impact}"));
    let round = |v: &Value| (v.as_f64().unwrap() * 1e9).round() / 1e9;
    (
        impact["gpus"].as_i64().unwrap(),
        round(&row["share_now"]),
        round(&row["share_proposed"]),
    )
}

#[tokio::test]
async fn an_approved_change_for_one_cluster_sets_its_shares_there_until_a_change_for_every_cluster()
{
    let mut live = Live::start().await;
    live.add_agent_in("east-1", 1, "east").await;
    live.add_agent_in("west-1", 1, "west").await;
    let shares = |olmo: f64, molmo: f64, cluster: Option<&str>| {
        json!({
            "node": "ai",
            "shares": { "ai/olmo": olmo, "ai/molmo": molmo },
            "justification": "molmo's season on west",
            "cluster": cluster,
        })
    };

    // Only the shares of existing children, on a cluster that exists.
    let mut adding = shares(1.0, 1.0, Some("west"));
    adding["shares"]["ai/new"] = json!(1.0);
    let (status, refused) = live.post("ada", "/api/v1/change-requests", adding).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "shares");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("only sets the shares of existing children"),
        "{refused}"
    );
    let (status, refused) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            shares(1.0, 3.0, Some("north")),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["field"], "cluster");

    let (status, request) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            shares(1.0, 3.0, Some("west")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{request}");
    assert_eq!(request["cluster"], "west");
    let id = request["id"].as_i64().unwrap();
    // Its impact preview replays west alone, from west's shares.
    assert_eq!(molmo_impact(&live, id).await, (1, 0.25, 0.75));
    // Same rules as any request: the proposer may not approve it; the owner may.
    let (status, _) = live
        .post(
            "ada",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, approved) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["state"], "applied");

    assert_eq!(of_parent(&live, "west", "ai/molmo").await, 0.75);
    assert_eq!(of_parent(&live, "east", "ai/molmo").await, 0.25);
    // West's tree shows west's share and, for the editor, the tree's own.
    let (_, west_tree) = live.get("ada", "/api/v1/tree?cluster=west").await;
    let molmo = west_tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["path"] == "ai/molmo")
        .cloned()
        .unwrap();
    assert_eq!(
        (molmo["share"].as_f64(), molmo["tree_share"].as_f64()),
        (Some(3.0), Some(1.0))
    );
    // The node's share history lists it, for west alone, with who proposed and approved it.
    let (status, history) = live.get("bob", "/api/v1/tree/shares?path=ai/molmo").await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let versions = history["versions"].as_array().unwrap();
    let last = versions.last().unwrap();
    assert_eq!(last["cluster"], "west", "{history}");
    assert_eq!(last["share"], 3.0, "{history}");
    assert_eq!(last["origin"]["proposer"], "ada", "{history}");
    assert_eq!(last["origin"]["decided_by"], "pat", "{history}");
    assert!(versions[..versions.len() - 1]
        .iter()
        .all(|v| v.get("cluster").is_none()));
    // The scheduler decides west with west's shares.
    let now = live.runtime.now();
    let mut read = db::begin_read(&live.app.pool).await.unwrap();
    let snaps = snapshot::load(&mut read, &live.runtime.config(), now)
        .await
        .unwrap()
        .expect("a tree");
    read.rollback().await.unwrap();
    let fraction = |cluster: &str| {
        let snap = snaps.named(Some(cluster)).unwrap();
        let molmo = snap.tree.tree.find("ai/molmo").unwrap();
        snap.engine.tree().version_at(now).fraction(molmo)
    };
    assert!((fraction("west") - 3.0 * fraction("east")).abs() < 1e-9);
    // A review of west alone shows west's shares; one of east, the tree's. (A second on, so the
    // period's last second is after the change.)
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(share_at_end(&live, "west", "ai/molmo").await, 3.0 * 0.25);
    assert_eq!(share_at_end(&live, "east", "ai/molmo").await, 0.25);

    // A change for one cluster starts from that cluster's shares.
    let (_, again) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            shares(2.0, 2.0, Some("west")),
        )
        .await;
    let molmo = again["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["child"] == "molmo")
        .cloned()
        .unwrap();
    assert_eq!(molmo["old_share"], 3.0, "{again}");
    let again_id = again["id"].as_i64().unwrap();
    assert_eq!(molmo_impact(&live, again_id).await, (1, 0.75, 0.5));
    live.post(
        "ada",
        &format!("/api/v1/change-requests/{}/withdraw", again["id"]),
        json!({}),
    )
    .await;

    // A change for every cluster sets the shares everywhere, the override included.
    let (_, everywhere) = live
        .post("ada", "/api/v1/change-requests", shares(1.0, 1.0, None))
        .await;
    assert_eq!(everywhere["cluster"], Value::Null);
    // Replayed on each cluster with its own shares: molmo's mean share of the two GPUs is
    // (0.75 + 0.25) / 2 now and a half under the change.
    let everywhere_id = everywhere["id"].as_i64().unwrap();
    assert_eq!(molmo_impact(&live, everywhere_id).await, (2, 0.5, 0.5));
    let (status, _) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{}/approve", everywhere["id"]),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(of_parent(&live, "west", "ai/molmo").await, 0.5);
    assert_eq!(of_parent(&live, "east", "ai/molmo").await, 0.5);
}

#[tokio::test]
async fn without_a_cluster_named_the_tree_shows_the_one_its_menu_offers_first() {
    let mut live = Live::start().await;
    live.add_agent_in("west-1", 1, "west").await;
    // East's node is registered and has not connected yet: the clusters menu offers east first.
    server::nodes::service::register_node(
        &live.app.pool,
        "east-1",
        Some("east"),
        crate::support::now(),
    )
    .await
    .unwrap();
    let (_, clusters) = live.get("ada", "/api/v1/clusters").await;
    assert_eq!(names(&clusters, "clusters"), ["east", "west"]);
    // East has shares of its own for ai's children.
    let (status, request) = live
        .post(
            "ada",
            "/api/v1/change-requests",
            json!({
                "node": "ai",
                "shares": { "ai/olmo": 1.0, "ai/molmo": 3.0 },
                "justification": "east starts with molmo",
                "cluster": "east",
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{request}");
    let id = request["id"].as_i64().unwrap();
    let (status, approved) = live
        .post(
            "pat",
            &format!("/api/v1/change-requests/{id}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(of_parent(&live, "east", "ai/molmo").await, 0.75);
    assert_eq!(of_parent(&live, "west", "ai/molmo").await, 0.25);

    // Without a cluster, the tree is east's, as the menu says.
    assert_eq!(of_parent(&live, "", "ai/molmo").await, 0.75);
}

#[tokio::test]
async fn start_estimates_take_run_times_from_the_cluster_the_work_waits_on() {
    let mut live = Live::start().await;
    live.add_agent_in("east-1", 4, "east").await;
    live.add_agent_in("west-1", 4, "west").await;
    // ai/olmo's work on west takes a second; on east nothing of it has finished yet.
    let mut quick = Vec::new();
    for i in 0..3 {
        let body = job("ai/olmo", &format!("quick-{i}"), "sleep 1", 1, 900, true);
        quick.push(live.submit("ada", with_cluster(body, "west")).await);
    }
    for id in quick {
        live.wait_for_state(id, "succeeded").await;
    }
    let long = job("ai/olmo", "long", "sleep 120", 4, 900, true);
    let first = live.submit("ada", with_cluster(long, "east")).await;
    let started = live.wait_for_state(first, "running").await["started_at"]
        .as_i64()
        .unwrap();
    let next = job("ai/olmo", "next", "sleep 1", 4, 900, true);
    let second = live.submit("ada", with_cluster(next, "east")).await;
    // East's work is assumed to run an hour, as on a cluster where nothing has finished; west's
    // one-second runs would have had it end at its 15-minute minimum.
    let queued = live.workload(second).await;
    assert_eq!(queued["state"], "queued", "{queued}");
    assert_eq!(queued["estimated_start"]["at"], started + 3600, "{queued}");
}
