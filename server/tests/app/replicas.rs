//! Two `hourglass serve` replicas on one database: one holds the scheduler lease; killing it hands
//! the lease to the other within 10 s, and no decision is applied twice.

use crate::live::{job, ORG};
use crate::restart::{healthy, serve, state_of, wait_for};
use crate::support::{fake_site, free_port, TestDb};
use server::{
    api::tokens,
    budget::{import::import_org, org_file::OrgFile},
    db,
    nodes::service as node_service,
    users::service,
};
use std::time::{Duration, Instant};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hourglass");

async fn scheduler(http: &reqwest::Client, url: &str) -> String {
    match http.get(format!("{url}/healthz")).send().await {
        Ok(r) => r.json::<serde_json::Value>().await.unwrap()["scheduler"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        Err(_) => String::new(),
    }
}

async fn becomes(http: &reqwest::Client, url: &str, role: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while start.elapsed() < within {
        if scheduler(http, url).await == role {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} did not become {role} within {within:?}");
}

#[tokio::test]
async fn killing_the_leader_hands_the_lease_to_the_other_replica_within_ten_seconds() {
    let test_db = TestDb::new().await;
    let database = test_db.url.clone();
    let site = fake_site(test_db.dir.path());
    let pool = db::open(&database).await.unwrap();
    for name in ["root", "pat", "ada", "bob"] {
        service::create_user(&pool, name, "researcher", "long enough 1".into())
            .await
            .unwrap();
    }
    import_org(&pool, &OrgFile::parse(ORG).unwrap(), service::now())
        .await
        .unwrap();
    let (_, node_token) = node_service::register_node(&pool, "n1").await.unwrap();
    let ada = server::users::repo::find_user_by_username(&pool, "ada")
        .await
        .unwrap()
        .unwrap();
    let token = tokens::create_token(&pool, ada.user_id, "test")
        .await
        .unwrap();
    let http = crate::live::client();

    let (port_a, port_b) = (free_port(), free_port());
    let (url_a, url_b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let mut a = serve(&database, &site, port_a);
    healthy(&http, &url_a).await;
    becomes(&http, &url_a, "leader", Duration::from_secs(5)).await;
    let _b = serve(&database, &site, port_b);
    healthy(&http, &url_b).await;
    for _ in 0..3 {
        assert_eq!(scheduler(&http, &url_b).await, "follower");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The agent and the researcher talk only to the follower.
    let _agent = Command::new(BIN)
        .args([
            "agent",
            "--server",
            &url_b,
            "--name",
            "n1",
            "--gpus",
            "2",
            "--token",
            &node_token,
        ])
        .env("HOURGLASS_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let submit = |name: &'static str, command: &'static str| {
        let (http, url, token) = (http.clone(), url_b.clone(), token.clone());
        async move {
            let response = http
                .post(format!("{url}/api/v1/workloads"))
                .bearer_auth(&token)
                .json(&job("ai/olmo", name, command, 1, 900, true))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), reqwest::StatusCode::CREATED);
            response.json::<serde_json::Value>().await.unwrap()["id"]
                .as_i64()
                .unwrap()
        }
    };
    for _ in 0..100 {
        let nodes: serde_json::Value = http
            .get(format!("{url_b}/api/v1/nodes"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if nodes["nodes"][0]["state"] == "healthy" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = submit("long", "sleep 60").await;
    wait_for(&http, &url_b, &token, first, "running").await;

    a.start_kill().unwrap();
    a.wait().await.unwrap();
    let handover = becomes(&http, &url_b, "leader", Duration::from_secs(10)).await;
    eprintln!("lease handed over {handover:?} after the leader was killed");

    let second = submit("short", "true").await;
    wait_for(&http, &url_b, &token, second, "succeeded").await;
    assert_eq!(
        state_of(&http, &url_b, &token, first).await["state"],
        "running"
    );

    for id in [first, second] {
        let runs: i64 =
            sqlx::query_scalar("select count(*) from workload_run where workload_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        let starts: i64 = sqlx::query_scalar(
            "select count(*) from workload_event where workload_id = $1 and kind = 'started'",
        )
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!((runs, starts), (1, 1), "workload {id} started exactly once");
    }
    let (epoch, holder): (i64, String) =
        sqlx::query_as("select epoch, holder from scheduler_lease where name = 'scheduler'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(epoch, 2, "two holders so far: {holder}");
}
