//! GPU utilization end to end: a fake `nvidia-smi` on the agent's `PATH` reports its GPUs busy;
//! the samples reach the workload (API and page), the usage CSV and `/metrics`.

use crate::live::{job, AgentProcess, Live, METRICS_TOKEN};
use server::nodes::service as node_service;
use std::{path::Path, time::Duration};

/// A fake `nvidia-smi` with two H200s, both 41% busy.
fn fake_nvidia_smi(dir: &Path) {
    let script = r#"#!/bin/sh
case "$*" in
  *index,name,uuid*) printf '0, NVIDIA H200, GPU-0\n1, NVIDIA H200, GPU-1\n' ;;
  *utilization.gpu*) printf '0, 41, 30000, 81559, 250.5\n1, 41, 28000, 81559, [N/A]\n' ;;
  *) printf '0, GPU-0, 0\n1, GPU-1, 0\n' ;;
esac
"#;
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn sampled_utilization_reaches_the_workload_page_the_usage_csv_and_the_metrics() {
    let live = Live::start().await;
    let fake = tempfile::tempdir().unwrap();
    fake_nvidia_smi(fake.path());
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (_, token) = node_service::register_node(&live.app.pool, "n1", crate::support::now())
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
    let _agent = AgentProcess::spawn_with_env(&args, None, &[("PATH", path)]);
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
