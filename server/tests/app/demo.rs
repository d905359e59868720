//! `hourglass serve --demo` brings up an organisation, four live simulated nodes and a trickle.

use std::{process::Stdio, time::Duration};
use tokio::{io::AsyncReadExt, process::Command};

use crate::support::{fake_site, free_port, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_hourglass");

#[tokio::test]
async fn the_demo_seeds_people_runs_simulated_nodes_and_keeps_work_flowing() {
    let test_db = TestDb::new().await;
    let dir = &test_db.dir;
    let database = test_db.url.clone();
    let site = fake_site(dir.path());
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let began = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut server = Command::new(BIN)
        .args(["serve", "--demo", "--addr", &format!("127.0.0.1:{port}")])
        .arg("--site-root")
        .arg(&site)
        .env("HOURGLASS_DATABASE_URL", &database)
        .env("HOURGLASS_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let http = crate::live::client();
    let mut token = String::new();
    let mut last_error = String::new();
    for _ in 0..600 {
        let output = Command::new(BIN)
            .args(["admin", "create-token", "--username", "admin"])
            .env("HOURGLASS_DATABASE_URL", &database)
            .output()
            .await
            .unwrap();
        last_error = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            token = String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .last()
                .unwrap()
                .to_string();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        token.starts_with("hgt_"),
        "the token is alone on the last line: {token:?} {last_error}"
    );

    let mut healthy = 0;
    let mut started = false;
    for _ in 0..150 {
        if let Ok(response) = http
            .get(format!("{url}/api/v1/nodes"))
            .bearer_auth(&token)
            .send()
            .await
        {
            let nodes: serde_json::Value = response.json().await.unwrap();
            healthy = nodes["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["state"] == "healthy")
                .count();
        }
        if let Ok(response) = http
            .get(format!("{url}/api/v1/workloads"))
            .bearer_auth(&token)
            .send()
            .await
        {
            let list: serde_json::Value = response.json().await.unwrap();
            started = list
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["first_started_at"].as_i64().is_some_and(|t| t >= began));
        }
        if healthy == 4 && started {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(healthy, 4, "four simulated nodes are live");
    assert!(started, "the trickle's first workload started");

    // Two clusters, each with its own nodes; the trickle feeds both.
    let clusters = crate::live::get_json(&http, &format!("{url}/api/v1/clusters"), &token).await;
    let shape: Vec<(String, i64, i64)> = clusters["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["nodes"].as_i64().unwrap(),
                c["gpus"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [("b200".to_string(), 2, 12), ("h100".to_string(), 2, 16)]
    );
    let mut fed = std::collections::BTreeSet::new();
    // The trickle submits every 15 s, to one cluster then the other.
    for _ in 0..150 {
        let list = crate::live::get_json(&http, &format!("{url}/api/v1/workloads"), &token).await;
        fed = list
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["submitted_at"].as_i64().is_some_and(|t| t >= began))
            .map(|w| w["cluster"].as_str().unwrap().to_string())
            .collect();
        if fed.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        fed.len(),
        2,
        "the trickle submits to both clusters: {fed:?}"
    );

    let tree = crate::live::get_json(&http, &format!("{url}/api/v1/tree"), &token).await;
    let paths: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"lang/pretrain") && paths.contains(&"vision/robotics"),
        "{paths:?}"
    );

    let pool = server::db::connect(&database).await.unwrap();
    let (hours, charged): (i64, f64) = sqlx::query_as(
        "select count(distinct hour), coalesce(sum(charged_gpu_s), 0.0) from usage_hour",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(hours >= 29 * 24, "a month of hourly history: {hours} hours");
    assert!(
        charged > 28.0 * 3600.0 * 24.0,
        "days of charged GPU time: {charged}"
    );

    // With the simulated nodes' utilization, as their agents would have sampled it: every run
    // GPU-second sampled, used between the idle 1% and the busiest 95%.
    let (sampled, utilized): (f64, f64) = sqlx::query_as(
        "select coalesce(sum(sampled_gpu_s), 0.0), coalesce(sum(utilized_gpu_s), 0.0) from usage_hour
         where hour < $1",
    )
    .bind(began - 3600)
    .fetch_one(&pool)
    .await
    .unwrap();
    let busy: f64 = sqlx::query_scalar(
        "select coalesce(sum(charged_gpu_s + unallocated_gpu_s), 0.0) from usage_hour where hour < $1",
    )
    .bind(began - 3600)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!((sampled - busy).abs() < 1e-6 * busy, "{sampled} of {busy}");
    let mean = utilized / sampled;
    assert!((0.3..0.9).contains(&mean), "mean utilization {mean}");

    // The month's workloads are there too, ended, on the demo's nodes: the same history as the
    // ledger (less the work still running at the month's end, left out).
    let (workloads, run_gpu_s): (i64, i64) = sqlx::query_as(
        "select count(distinct w.workload_id), cast(coalesce(sum(r.gpus * (r.ended_at - r.started_at)), 0) as bigint)
         from workload w join workload_run r on r.workload_id = w.workload_id
         where w.submitted_at < $1 and r.allocated = 1",
    )
    .bind(began - 3600)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(workloads > 500, "a month of ended workloads: {workloads}");
    // Ended as the runtime leaves them: no run in progress (the impact preview reads a run in
    // progress as running until now).
    let in_progress: i64 = sqlx::query_scalar(
        "select count(*) from workload
         where state not in ('queued', 'running') and (started_at is not null or protected_until is not null)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(in_progress, 0, "ended workloads with a run in progress");
    // Their runs read as the runtime writes them: GPUs as `0;1;2`, a gang's hosts one run.
    let (comma_lists, miscounted): (i64, i64) = sqlx::query_as(
        "select (select count(*) from workload_run where gpu_indices like '%,%'),
                (select count(*) from workload w where w.run_count <>
                    (select count(distinct r.started_at) from workload_run r
                     where r.workload_id = w.workload_id))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((comma_lists, miscounted), (0, 0));
    let run_gpu_s = run_gpu_s as f64;
    assert!(
        run_gpu_s <= charged * 1.001 && run_gpu_s >= charged * 0.8,
        "their runs are what the ledger charged: {run_gpu_s} of {charged}"
    );
    // So a change request's impact preview replays that month's last two weeks, not the trickle.
    let proposal = serde_json::json!({
        "node": "lang", "shares": {"lang/pretrain": 1, "lang/posttrain": 1, "lang/eval": 1},
        "justification": "even out",
    });
    let created = http
        .post(format!("{url}/api/v1/change-requests"))
        .bearer_auth(&token)
        .json(&proposal)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<serde_json::Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    let impact = crate::live::get_json(
        &http,
        &format!("{url}/api/v1/change-requests/{id}/impact"),
        &token,
    )
    .await;
    assert!(impact["workloads"].as_i64().unwrap() > 200, "{impact}");
    let rows = impact["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{impact}");
    assert!(
        rows.iter()
            .all(|r| r["delivered_now_gpu_h"].as_f64().unwrap() > 1.0
                && r["ratio_now"].as_f64().is_some()
                && (r["share_proposed"].as_f64().unwrap() - 0.6 / 3.0).abs() < 1e-9),
        "{impact}"
    );

    // Every page says it is the demo, the sign-in page included.
    let login = http
        .get(format!("{url}/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(login.contains("class=\"demo-banner\""), "{login}");

    server.start_kill().unwrap();
    let mut stdout = String::new();
    server
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .await
        .unwrap();
    assert!(stdout.contains("Demo accounts"), "{stdout}");
    assert!(stdout.contains("hourglass-demo"), "{stdout}");
}

#[tokio::test]
async fn the_demo_refuses_a_database_with_people_of_its_own_and_changes_nothing() {
    let test_db = TestDb::new().await;
    let pool = server::db::open(&test_db.url).await.unwrap();
    server::users::service::create_user(
        &pool,
        "alice",
        "admin",
        "long enough 1".into(),
        crate::support::now(),
    )
    .await
    .unwrap();
    let refused = server::demo::prepare(&pool, crate::support::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("--demo needs an empty database or one --demo made"),
        "{refused}"
    );
    let people: i64 = sqlx::query_scalar("select count(*) from \"user\"")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(people, 1, "nothing was seeded");

    // A database --demo made is served again (and marked as the demo's).
    let demo_db = TestDb::new().await;
    let demo = server::db::open(&demo_db.url).await.unwrap();
    server::demo::prepare(&demo, crate::support::now())
        .await
        .unwrap();
    server::demo::prepare(&demo, crate::support::now())
        .await
        .unwrap();
}
