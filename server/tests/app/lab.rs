//! The simulator lab's server functions: who may use it, bad input, and results equal to the
//! simulator's own run of the same input.

use crate::support::TestApp;
use axum::http::StatusCode;
use scheduler::sim::{self, scenario, SegmentEnd, SimConfig, SimInput};
use scheduler::Policy;
use std::time::Duration;

async fn signed_in(app: &TestApp, name: &str, role: &str) -> String {
    app.create_user(name, role, "long enough 1").await;
    app.sign_in(name, "long enough 1").await
}

fn form<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<(String, &'a str)> {
    pairs
        .iter()
        .map(|(k, v)| (format!("form[{k}]"), *v))
        .collect()
}

async fn post(
    app: &TestApp,
    path: &str,
    pairs: &[(String, &str)],
    cookie: &str,
) -> crate::support::TestResponse {
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    app.post_form(path, &pairs, Some(cookie)).await
}

/// Polls the run until it is done; panics after a minute.
async fn finished(app: &TestApp, id: u64, cookie: &str) -> serde_json::Value {
    for _ in 0..600 {
        let id = id.to_string();
        let run = app
            .post_form("/api/lab/run", &[("id", id.as_str())], Some(cookie))
            .await;
        assert_eq!(run.status, StatusCode::OK, "{}", run.body);
        let run = run.json();
        match run["state"].as_str() {
            Some("done") => return run,
            Some("failed") => panic!("lab run failed: {run}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("lab run {id} did not finish within a minute");
}

#[tokio::test]
async fn researchers_are_refused_the_lab_and_leadership_may_use_it() {
    let app = TestApp::new().await;
    let researcher = signed_in(&app, "ada", "researcher").await;
    let leader = signed_in(&app, "lee", "leadership").await;
    for path in ["/api/lab/sources", "/api/lab/runs"] {
        let refused = app.post_form(path, &[], Some(&researcher)).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert!(refused.body.contains("leadership and administrators"));
        let allowed = app.post_form(path, &[], Some(&leader)).await;
        assert_eq!(allowed.status, StatusCode::OK, "{path}: {}", allowed.body);
    }
    let start = form(&[("source", "reference"), ("seed", "1"), ("days", "1")]);
    let refused = post(&app, "/api/lab/start", &start, &researcher).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let runs = app.post_form("/api/lab/runs", &[], Some(&leader)).await;
    assert_eq!(
        runs.json(),
        serde_json::json!([]),
        "the refused run was not queued"
    );
    let signed_out = app.post_form("/api/lab/sources", &[], None).await;
    assert_eq!(signed_out.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bad_lab_input_names_its_field_and_queues_nothing() {
    let app = TestApp::new().await;
    let leader = signed_in(&app, "lee", "leadership").await;
    let s = scenario::generate(&scenario::ScenarioConfig::reference(1, 1));
    let broken = format!("{}not,a,row\n", s.trace_csv);
    let cases = [
        (
            form(&[("source", "reference"), ("seed", "1"), ("days", "0")]),
            "days",
        ),
        (
            form(&[("source", "reference"), ("seed", "one"), ("days", "1")]),
            "seed",
        ),
        (
            form(&[
                ("source", "reference"),
                ("seed", "1"),
                ("days", "1"),
                ("window", "a while"),
            ]),
            "window",
        ),
        (form(&[("source", "philly"), ("days", "1")]), "source"),
        (
            form(&[
                ("source", "upload"),
                ("tree", &s.tree_toml),
                ("cluster", &s.cluster_toml),
                ("trace", &broken),
            ]),
            "trace",
        ),
    ];
    for (pairs, field) in cases {
        let response = post(&app, "/api/lab/start", &pairs, &leader).await;
        assert_eq!(
            response.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {}",
            response.body
        );
        assert!(
            response.body.contains(&format!("\"field\":\"{field}\"")),
            "{field}: {}",
            response.body
        );
    }
    let upload = post(
        &app,
        "/api/lab/start",
        &form(&[
            ("source", "upload"),
            ("tree", &s.tree_toml),
            ("cluster", &s.cluster_toml),
            ("trace", &broken),
        ]),
        &leader,
    )
    .await;
    let line = s.trace_csv.lines().count() + 1;
    assert!(
        upload
            .body
            .contains(&format!("The trace file: line {line}")),
        "{}",
        upload.body
    );
    let runs = app.post_form("/api/lab/runs", &[], Some(&leader)).await;
    assert_eq!(runs.json(), serde_json::json!([]));
    let missing = app
        .post_form("/api/lab/run", &[("id", "42")], Some(&leader))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_lab_run_reports_the_three_policies_as_the_simulator_measures_them() {
    let app = TestApp::new().await;
    let leader = signed_in(&app, "lee", "leadership").await;
    let start = post(
        &app,
        "/api/lab/start",
        &form(&[
            ("source", "reference"),
            ("seed", "3"),
            ("days", "2"),
            ("window", "3d"),
        ]),
        &leader,
    )
    .await;
    assert_eq!(start.status, StatusCode::OK, "{}", start.body);
    let id = start.json().as_u64().expect("a run id");
    let run = finished(&app, id, &leader).await;
    assert_eq!(run["label"], "Reference-like scenario, seed 3, 2 days");
    assert_eq!(run["requested_by"], "lee");

    // The same input through the simulator directly.
    let s = scenario::generate(&scenario::ScenarioConfig::reference(3, 2));
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
    let config = SimConfig {
        window: 3 * 86_400,
        ..SimConfig::default()
    };
    let fair = sim::run(
        &input,
        &SimConfig {
            policy: Policy::FairShare,
            ..config
        },
    );
    let baseline = sim::run(
        &input,
        &SimConfig {
            policy: Policy::Priority,
            ..config
        },
    );
    let slurm = sim::run(
        &input,
        &SimConfig {
            policy: Policy::Slurm,
            ..config
        },
    );

    let result = &run["result"];
    assert_eq!(result["gpus"], 1024);
    assert_eq!(result["workloads"], fair.report.workloads.submitted);
    let measure = |label: &str| {
        result["measures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["label"] == label)
            .unwrap_or_else(|| panic!("no measure {label}"))
            .clone()
    };
    let pct = |x: Option<f64>| format!("{:.1}%", x.unwrap() * 100.0);
    let overall = measure("Delivered / owed, overall");
    assert_eq!(
        overall["fair_share"],
        pct(fair.report.delivered_over_owed.overall)
    );
    assert_eq!(
        overall["priority"],
        pct(baseline.report.delivered_over_owed.overall)
    );
    assert_eq!(
        overall["slurm"],
        pct(slurm.report.delivered_over_owed.overall)
    );
    assert!(overall["verdict_slurm"].as_str().is_some(), "{overall}");
    let preemptions = measure("Preemptions");
    assert_eq!(
        preemptions["fair_share"],
        fair.report.preemptions.to_string()
    );
    assert_eq!(
        preemptions["priority"],
        baseline.report.preemptions.to_string()
    );
    assert_eq!(preemptions["slurm"], slurm.report.preemptions.to_string());
    let lost = measure("Lost to preemption: allocated / free");
    assert_eq!(
        lost["fair_share"],
        fair.report.lost_to_preemption.percentages()
    );
    assert_eq!(lost["slurm"], slurm.report.lost_to_preemption.percentages());
    let debug = result["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["class"] == "debug" && w["policy"] == "priority")
        .unwrap()
        .clone();
    assert_eq!(debug["count"], baseline.report.wait_s.debug.count);
    assert_eq!(
        debug["p90_s"],
        serde_json::json!(baseline.report.wait_s.debug.p90)
    );
    assert_eq!(result["teams"].as_array().unwrap().len(), 15);
    assert_eq!(
        result["teams"][0]["delivered_over_owed"][2],
        serde_json::json!(
            slurm
                .report
                .nodes
                .iter()
                .find(|n| n.path == result["teams"][0]["path"])
                .unwrap()
                .delivered_over_owed
        )
    );

    // The SLURM peer's Gantt is there too, with as many bars as its segments give.
    let slurm_gantt = app
        .post_form(
            "/api/lab/gantt",
            &[
                ("id", id.to_string().as_str()),
                ("policy", "slurm"),
                ("gpus", "16"),
                ("from", "86400"),
                ("to", "172800"),
            ],
            Some(&leader),
        )
        .await;
    assert_eq!(slurm_gantt.status, StatusCode::OK, "{}", slurm_gantt.body);
    let expected: usize = slurm
        .segments
        .iter()
        .filter(|seg| seg.node.0 < 2 && seg.start < 172_800 && seg.end > 86_400)
        .map(|seg| seg.gpus.count() as usize)
        .sum();
    assert_eq!(
        slurm_gantt.json()["bars"].as_array().unwrap().len(),
        expected
    );

    // The Gantt of the first 16 GPUs on the second day: one bar per segment and GPU there.
    let (from, to) = (86_400i64, 2 * 86_400i64);
    let gantt = app
        .post_form(
            "/api/lab/gantt",
            &[
                ("id", id.to_string().as_str()),
                ("policy", "fair-share"),
                ("gpus", "16"),
                ("from", from.to_string().as_str()),
                ("to", to.to_string().as_str()),
            ],
            Some(&leader),
        )
        .await;
    assert_eq!(gantt.status, StatusCode::OK, "{}", gantt.body);
    let gantt = gantt.json();
    assert_eq!(gantt["rows"].as_array().unwrap().len(), 16);
    assert_eq!(gantt["rows"][8], "h100-001 · GPU 0");
    let bars = gantt["bars"].as_array().unwrap();
    let on_first_hosts = |seg: &sim::Segment| seg.node.0 < 2 && seg.start < to && seg.end > from;
    let expected: usize = fair
        .segments
        .iter()
        .filter(|seg| on_first_hosts(seg))
        .map(|seg| seg.gpus.count() as usize)
        .sum();
    assert_eq!(bars.len(), expected);
    let preempted: usize = fair
        .segments
        .iter()
        .filter(|seg| {
            on_first_hosts(seg)
                && seg.end <= to
                && matches!(seg.end_kind, SegmentEnd::Preempted | SegmentEnd::Drained)
        })
        .map(|seg| seg.gpus.count() as usize)
        .sum();
    assert_eq!(
        bars.iter().filter(|b| b["preempted"] == true).count(),
        preempted
    );
    for bar in bars {
        let (start, end) = (bar["start"].as_i64().unwrap(), bar["end"].as_i64().unwrap());
        assert!(from <= start && start < end && end <= to, "{bar}");
        assert!(bar["row"].as_u64().unwrap() < 16);
    }
    let bad_policy = app
        .post_form(
            "/api/lab/gantt",
            &[
                ("id", id.to_string().as_str()),
                ("policy", "fifo"),
                ("gpus", "16"),
                ("from", "0"),
                ("to", "10"),
            ],
            Some(&leader),
        )
        .await;
    assert_eq!(bad_policy.status, StatusCode::UNPROCESSABLE_ENTITY);
}
