//! GPU utilization end to end: a fake `nvidia-smi` on the agent's `PATH` reports its GPUs busy;
//! the samples reach the workload (API and page), the usage CSV and `/metrics`.

use crate::live::{job, AgentProcess, Live, METRICS_TOKEN};
use server::nodes::service as node_service;
use std::{path::Path, time::Duration};

/// A fake `nvidia-smi` with two H200s, both `busy`% busy.
fn fake_nvidia_smi(dir: &Path, busy: u32) {
    let script = format!(
        r#"#!/bin/sh
case "$*" in
  *index,name,uuid*) printf '0, NVIDIA H200, GPU-0\n1, NVIDIA H200, GPU-1\n' ;;
  *utilization.gpu*) printf '0, {busy}, 30000, 81559, 250.5\n1, {busy}, 28000, 81559, [N/A]\n' ;;
  *) printf '0, GPU-0, 0\n1, GPU-1, 0\n' ;;
esac
"#
    );
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Node `n1` registered and its agent started, sampling every second the fake GPUs at `busy`%.
async fn agent_with_fake_gpus(live: &Live, busy: u32) -> (tempfile::TempDir, AgentProcess) {
    let fake = tempfile::tempdir().unwrap();
    fake_nvidia_smi(fake.path(), busy);
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (_, token) = node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let args = [
        "--server",
        &live.url,
        "--name",
        "n1",
        "--gpus",
        "auto",
        "--token",
        &token,
        "--sample-every-s",
        "1",
    ];
    let agent = AgentProcess::spawn_with_env(&args, None, &[("PATH", path)]);
    (fake, agent)
}

#[tokio::test]
async fn a_workload_holding_idle_gpus_for_an_hour_is_flagged_on_its_owners_lists() {
    let live = Live::start().await;
    let (_fake, _agent) = agent_with_fake_gpus(&live, 0).await;
    live.wait_for_node("n1", "healthy").await;
    let idle = live
        .submit("ada", job("ai/olmo", "stuck", "sleep 60", 1, 900, true))
        .await;
    let busy_enough = live
        .submit("ada", job("ai/olmo", "fresh", "sleep 60", 1, 900, true))
        .await;
    live.wait_for_state(idle, "running").await;
    live.wait_for_state(busy_enough, "running").await;
    // The first has been sampled idle for the past hour (the agent adds this bucket's zeros);
    // the second only since it started.
    let bucket_s = server::agent::utilization::BUCKET_S;
    let now = crate::support::now();
    let current = now.div_euclid(bucket_s) * bucket_s;
    let mut bucket = current - 3600 - bucket_s;
    while bucket < current {
        sqlx::query(
            "insert into utilization_bucket (workload_id, bucket, util_sum, samples) values ($1, $2, 0, 30)",
        )
        .bind(idle)
        .bind(bucket)
        .execute(&live.app.pool)
        .await
        .unwrap();
        bucket += bucket_s;
    }
    let flagged = |list: &serde_json::Value, id: i64| {
        let w = list
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["id"] == id)
            .unwrap()
            .clone();
        w["idle_for_s"].as_i64()
    };
    let mut list = serde_json::Value::Null;
    for _ in 0..100 {
        list = live.get("ada", "/api/v1/workloads?mine=true").await.1;
        if flagged(&list, busy_enough).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        flagged(&list, idle).is_some_and(|s| s >= app::workloads::IDLE_FLAG_S),
        "{list}"
    );
    assert!(
        flagged(&list, busy_enough).is_some_and(|s| s < app::workloads::IDLE_FLAG_S),
        "idle, but not for an hour yet: {list}"
    );

    // The list and the overview say it where the owner looks.
    let cookie = live.app.sign_in("ada", "long enough 1").await;
    let page = live.app.get("/workloads", Some(&cookie)).await;
    assert_eq!(page.body.matches(">idle GPUs<").count(), 1, "{}", page.body);
    let home = live.app.get("/", Some(&cookie)).await;
    assert!(
        home.body
            .contains("barely used (under 5%) for over an hour"),
        "{}",
        home.body
    );
}

#[tokio::test]
async fn sampled_utilization_reaches_the_workload_page_the_usage_csv_and_the_metrics() {
    let live = Live::start().await;
    let (_fake, _agent) = agent_with_fake_gpus(&live, 41).await;
    live.wait_for_node("n1", "healthy").await;
    let began = crate::support::now();
    let id = live
        .submit("ada", job("ai/olmo", "train", "sleep 60", 2, 900, true))
        .await;
    live.wait_for_state(id, "running").await;

    let mut workload = live.workload(id).await;
    for _ in 0..200 {
        if workload["utilization"]["samples"].as_i64().unwrap_or(0) >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        workload = live.workload(id).await;
    }
    let utilization = &workload["utilization"];
    assert!(
        utilization["samples"].as_i64().unwrap() >= 4,
        "{utilization}"
    );
    assert_eq!(
        utilization["simulated"], false,
        "measured on an H200: {utilization}"
    );
    assert!(
        (utilization["mean"].as_f64().unwrap() - 0.41).abs() < 1e-9,
        "{utilization}"
    );
    let series = utilization["series"].as_array().unwrap();
    assert!(
        !series.is_empty()
            && series
                .iter()
                .all(|b| (b[1].as_f64().unwrap() - 0.41).abs() < 1e-9),
        "{utilization}"
    );

    // The workload's page says it in words.
    let cookie = live.app.sign_in("ada", "long enough 1").await;
    let page = live
        .app
        .get(&format!("/workloads/{id}"), Some(&cookie))
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("used 41% of its 2 GPUs"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("GPU utilization in 5-minute steps"),
        "{}",
        page.body
    );

    // The usage CSV: ai/olmo's sampled hour at 41%.
    let hour = began.div_euclid(3600) * 3600;
    let csv = live
        .http
        .get(format!(
            "{}/api/v1/reports/usage.csv?from={hour}&to={}&node=ai&granularity=hour",
            live.url,
            crate::support::now() + 1
        ))
        .bearer_auth(live.token("pat").await)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(csv.as_bytes())
        .records()
        .map(Result::unwrap)
        .collect();
    let olmo: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[1] == "ai/olmo").collect();
    assert!(
        olmo.iter()
            .any(|r| &r[7] == "0.4100" && r[6].parse::<f64>().unwrap() > 0.0),
        "{csv}"
    );
    let molmo = rows.iter().find(|r| &r[1] == "ai/molmo").unwrap();
    assert_eq!(
        (&molmo[6], &molmo[7]),
        ("", ""),
        "nothing sampled there: {csv}"
    );

    // The quarter's review: the team's column and the headline card.
    let (year, quarter) = app::calendar::quarter_of(crate::support::now());
    let (_, review) = live
        .get(
            "pat",
            &format!("/api/v1/reports/quarter?year={year}&quarter={quarter}"),
        )
        .await;
    let row = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/olmo")
        .unwrap();
    assert!(
        (row["utilization"].as_f64().unwrap() - 0.41).abs() < 1e-9,
        "{row}"
    );
    assert!(row["utilized_gpu_h"].as_f64().unwrap() > 0.0, "{row}");
    let headline = &review["headline"];
    assert!(
        (headline["utilization"].as_f64().unwrap() - 0.41).abs() < 1e-9,
        "{headline}"
    );
    let molmo = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/molmo")
        .unwrap();
    assert!(molmo["utilization"].is_null(), "{molmo}");

    // The budget tree: the team and its program at 41% over the lookback window.
    let (status, tree) = live.get("pat", "/api/v1/tree").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{tree}");
    let node = |path: &str| {
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == path)
            .unwrap()
            .clone()
    };
    for path in ["ai/olmo", "ai"] {
        let n = node(path);
        assert!(
            (n["utilization"].as_f64().unwrap() - 0.41).abs() < 1e-9,
            "{n}"
        );
    }
    assert!(node("ai/molmo")["utilization"].is_null());

    // Who used the program's time: ada, at 41%.
    let (status, people) = live
        .get(
            "pat",
            &format!("/api/v1/reports/people?path=ai&from={hour}"),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{people}");
    let people = people["people"].as_array().unwrap();
    assert_eq!(people.len(), 1, "{people:?}");
    assert_eq!(people[0]["username"], "ada");
    assert_eq!(people[0]["workloads"], 1);
    assert!(
        people[0]["delivered_gpu_h"].as_f64().unwrap() > 0.0,
        "{people:?}"
    );
    assert_eq!(people[0]["unallocated_gpu_h"], 0.0);
    assert!((people[0]["utilization"].as_f64().unwrap() - 0.41).abs() < 1e-9);
    let (status, unknown) = live
        .get("pat", "/api/v1/reports/people?path=ai/nowhere")
        .await;
    assert_eq!(
        status,
        reqwest::StatusCode::UNPROCESSABLE_ENTITY,
        "{unknown}"
    );
    assert_eq!(unknown["field"], "path");

    // The metrics: each GPU's latest sample.
    let metrics = live
        .http
        .get(format!("{}/metrics", live.url))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for gpu in ["0", "1"] {
        let line = format!(
            "hourglass_gpu_utilization{{cluster=\"default\",node=\"n1\",gpu=\"{gpu}\"}} 0.41"
        );
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
}
