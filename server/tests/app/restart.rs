//! The server killed with SIGKILL mid-run comes back and neither loses nor double-charges time.

use crate::live::job;
use server::db;
use std::{process::Stdio, time::Duration};
use tokio::process::{Child, Command};

use crate::support::{fake_site, free_port, seed_org, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_hourglass");

pub(crate) fn serve(database: &str, site: &std::path::Path, port: u16) -> Child {
    serve_with(database, site, port, &[])
}

pub(crate) fn serve_with(
    database: &str,
    site: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
) -> Child {
    Command::new(BIN)
        .envs(env.iter().copied())
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--heartbeat-deadline-s",
            "6",
            "--grace-s",
            "1",
        ])
        .arg("--site-root")
        .arg(site)
        .env("HOURGLASS_DATABASE_URL", database)
        .env("HOURGLASS_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server")
}

pub(crate) async fn healthy(http: &reqwest::Client, url: &str) {
    for _ in 0..100 {
        if http
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the server did not come up");
}

pub(crate) async fn state_of(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: i64,
) -> serde_json::Value {
    crate::live::get_json(http, &format!("{url}/api/v1/workloads/{id}"), token).await
}

pub(crate) async fn wait_for(http: &reqwest::Client, url: &str, token: &str, id: i64, state: &str) {
    for _ in 0..300 {
        if state_of(http, url, token, id).await["state"] == state {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "workload never reached {state}: {}",
        state_of(http, url, token, id).await
    );
}

#[tokio::test]
async fn a_server_killed_mid_run_restarts_without_losing_or_double_charging_time() {
    let test_db = TestDb::new().await;
    let dir = &test_db.dir;
    let database = test_db.url.clone();
    let site = fake_site(dir.path());
    let pool = db::open(&database).await.unwrap();
    let (node_token, token) = seed_org(&pool).await;

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let http = crate::live::client();
    let mut server = serve(&database, &site, port);
    healthy(&http, &url).await;
    let _agent = crate::replicas::agent_on(&url, &node_token, &http, &token).await;
    let submitted = http
        .post(format!("{url}/api/v1/workloads"))
        .bearer_auth(&token)
        .json(&job("ai/olmo", "survivor", "sleep 6", 2, 900, true))
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), reqwest::StatusCode::CREATED);
    let id = submitted.json::<serde_json::Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    wait_for(&http, &url, &token, id, "running").await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    server.start_kill().unwrap();
    server.wait().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _server = serve(&database, &site, port);
    healthy(&http, &url).await;
    wait_for(&http, &url, &token, id, "succeeded").await;

    let runs: Vec<(i64, i64, i64)> = sqlx::query_as(
        "select gpus, started_at, ended_at from workload_run where workload_id = $1",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(runs.len(), 1, "the run survived the restart: {runs:?}");
    let (gpus, started, ended) = runs[0];
    assert!(ended - started >= 6, "the run lasted its 6 s: {runs:?}");
    let charged: f64 =
        sqlx::query_scalar("select coalesce(sum(charged_gpu_s), 0.0) from usage_hour")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        charged,
        (gpus * (ended - started)) as f64,
        "charged exactly the run's GPU-seconds"
    );
}

#[tokio::test]
async fn a_server_with_open_event_streams_and_held_agent_syncs_stops_within_seconds() {
    let test_db = crate::support::TestDb::new().await;
    let site = crate::support::fake_site(test_db.dir.path());
    let pool = server::db::open(&test_db.url).await.unwrap();
    let (node_token, token) = crate::support::seed_org(&pool).await;
    let port = crate::support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = serve(&test_db.url, &site, port);
    let http = crate::live::client();
    healthy(&http, &url).await;

    // Three open tabs' event streams and an agent's held sync.
    let mut streams = Vec::new();
    for _ in 0..3 {
        let response = http
            .get(format!("{url}/api/v1/stream"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        streams.push(response);
    }
    let held = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.post(format!("{url}/api/agent/v1/sync"))
                .bearer_auth(node_token)
                .json(&serde_json::json!({ "name": "n1", "gpus": 2, "wait_s": 60 }))
                .send()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    let asked = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("the server stopped although streams were open")
        .unwrap();
    assert!(status.success(), "{status}");
    eprintln!(
        "stopped {} ms after SIGTERM with 3 event streams and a held sync open",
        asked.elapsed().as_millis()
    );
    let answered = held.await.unwrap().expect("the held sync was answered");
    assert!(answered.status().is_success());
    for stream in streams {
        // Each stream ended cleanly instead of being cut.
        assert!(stream.bytes().await.is_ok());
    }
}
