//! `/metrics`: read back with a Prometheus text-format parser after real work on a live server.

use crate::{
    live::{job, Live, METRICS_TOKEN},
    support::TestApp,
};
use prometheus_parse::{Scrape, Value};
use reqwest::StatusCode;

/// The value of a gauge, counter or untyped sample, or a histogram's count.
fn number(value: &Value) -> f64 {
    match value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
        Value::Summary(_) => f64::NAN,
    }
}

/// The samples named `name` whose labels include every pair in `labels`.
fn find(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| number(&s.value))
        .collect()
}

async fn scrape(live: &Live, token: Option<&str>) -> (StatusCode, String, String) {
    let mut request = live.http.get(format!("{}/metrics", live.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

#[tokio::test]
async fn metrics_read_back_as_prometheus_text_with_the_gpus_the_queue_and_the_preemption_that_happened(
) {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    let free = live
        .submit(
            "bob",
            job("ai/molmo", "free-sweep", "sleep 60", 4, 0, false),
        )
        .await;
    live.wait_for_state(free, "running").await;
    let debug = live
        .submit("ada", job("ai/olmo", "debug", "sleep 60", 2, 900, true))
        .await;
    live.wait_for_state(free, "preempted").await;
    live.wait_for_state(debug, "running").await;
    // Four GPUs, two held by protected debug work: this one waits.
    let waiting = live
        .submit("bob", job("ai/molmo", "train", "sleep 60", 4, 3600, true))
        .await;
    assert_eq!(live.workload(waiting).await["state"], "queued");

    // A booked hour earlier this quarter, where the live ledger does not write: ai/olmo ran the
    // 2 GPU-hours it was owed.
    let (year, quarter) = app::calendar::quarter_of(crate::support::now());
    let hour = app::calendar::quarter(year, quarter).unwrap().0;
    sqlx::query("insert into capacity_hour (hour, healthy_gpu_s) values ($1, 14400)")
        .bind(hour)
        .execute(&live.app.pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into usage_hour (budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
         select budget_node_id, $1, 7200, 0, 7200, 7200 from budget_node where path = 'ai/olmo'",
    )
    .bind(hour)
    .execute(&live.app.pool)
    .await
    .unwrap();

    for token in [None, Some("a guess")] {
        let (status, _, body) = scrape(&live, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {body}");
        assert!(!body.contains("hourglass_"), "{body}");
    }
    let (status, kind, body) = scrape(&live, Some(METRICS_TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();

    for name in [
        "hourglass_gpus",
        "hourglass_queue_workloads",
        "hourglass_usage_ratio",
        "hourglass_delivered_over_owed",
        "hourglass_preemptions",
        "hourglass_scheduler_pass_seconds",
        "hourglass_page_snapshots",
        "hourglass_node_heartbeat_age_seconds",
        "hourglass_http_requests",
        "hourglass_http_request_duration_seconds",
    ] {
        assert!(
            scrape.docs.contains_key(name),
            "{name} is described: {body}"
        );
    }
    let gpus = |state| {
        find(
            &scrape,
            "hourglass_gpus",
            &[("cluster", "default"), ("state", state)],
        )
    };
    assert_eq!(gpus("allocated"), [2.0], "{body}");
    assert_eq!(gpus("unallocated"), [0.0], "{body}");
    assert_eq!(gpus("idle"), [2.0], "{body}");
    assert_eq!(
        find(
            &scrape,
            "hourglass_queue_workloads",
            &[("leaf", "ai/molmo"), ("kind", "allocated")]
        ),
        [1.0],
        "{body}"
    );
    assert_eq!(
        find(
            &scrape,
            "hourglass_preemptions_total",
            &[("cluster", "default"), ("rule", "free-work")]
        ),
        [1.0],
        "{body}"
    );
    let passes = find(&scrape, "hourglass_scheduler_pass_seconds", &[]);
    assert!(passes.first().is_some_and(|n| *n >= 1.0), "{body}");
    for source in ["base", "read"] {
        let built = find(
            &scrape,
            "hourglass_page_snapshots_total",
            &[("source", source)],
        );
        assert_eq!(built.len(), 1, "pages' snapshots built on {source}: {body}");
    }
    let age = find(
        &scrape,
        "hourglass_node_heartbeat_age_seconds",
        &[("node", "n1")],
    );
    assert!(
        age.first().is_some_and(|a| (0.0..30.0).contains(a)),
        "{body}"
    );
    let olmo = [("cluster", "default"), ("path", "ai/olmo")];
    let ratio = find(&scrape, "hourglass_usage_ratio", &olmo);
    assert!(ratio.first().is_some_and(|r| r.is_finite()), "{body}");
    let delivered = find(&scrape, "hourglass_delivered_over_owed", &olmo);
    assert!(
        delivered.first().is_some_and(|r| *r > 0.5 && *r <= 1.0),
        "{body}"
    );
    // Requests counted by the route's pattern, never by the raw path.
    let looks = find(
        &scrape,
        "hourglass_http_requests_total",
        &[
            ("route", "/api/v1/workloads/:id"),
            ("method", "GET"),
            ("status", "200"),
        ],
    );
    assert!(looks.first().is_some_and(|n| *n >= 3.0), "{body}");
    assert!(
        !body.contains(&format!("/api/v1/workloads/{debug}")),
        "{body}"
    );
    let latency = find(
        &scrape,
        "hourglass_http_request_duration_seconds",
        &[("route", "/api/v1/workloads"), ("method", "POST")],
    );
    assert_eq!(latency, [3.0], "{body}");
}

/// `body` with `cluster` set.
fn on(mut body: serde_json::Value, cluster: &str) -> serde_json::Value {
    body["cluster"] = cluster.into();
    body
}

#[tokio::test]
async fn with_two_clusters_every_gauge_and_preemption_is_labelled_with_its_own_cluster() {
    let mut live = Live::start().await;
    live.add_agent_in("east-1", 2, "east").await;
    live.add_agent_in("west-1", 4, "west").await;
    // West: a free sweep on its four GPUs, preempted by debug work on two of them.
    let free = job("ai/molmo", "free-sweep", "sleep 60", 4, 0, false);
    let free = live.submit("bob", on(free, "west")).await;
    live.wait_for_state(free, "running").await;
    let debug = job("ai/olmo", "debug", "sleep 60", 2, 900, true);
    let debug = live.submit("ada", on(debug, "west")).await;
    live.wait_for_state(free, "preempted").await;
    live.wait_for_state(debug, "running").await;
    // East: full with a long run, and one more waiting for it.
    let train = job("ai/olmo", "train", "sleep 60", 2, 3600, true);
    let train = live.submit("ada", on(train, "east")).await;
    live.wait_for_state(train, "running").await;
    let wait = job("ai/molmo", "wait", "sleep 60", 2, 3600, true);
    let waiting = live.submit("bob", on(wait, "east")).await;
    assert_eq!(live.workload(waiting).await["state"], "queued");
    // Hours booked on west: at the quarter's start ai/olmo ran the 2 GPU-hours it was owed, and
    // two hours ago it ran on all four GPUs, so its ratio there is far from east's.
    let (year, quarter) = app::calendar::quarter_of(crate::support::now());
    let start = app::calendar::quarter(year, quarter).unwrap().0;
    let recent = (crate::support::now() / 3600 - 2) * 3600;
    for (hour, gpu_s) in [(start, 7200.0), (recent, 14400.0)] {
        if hour == recent && recent <= start {
            continue;
        }
        sqlx::query(
            "insert into capacity_hour (hour, cluster_id, healthy_gpu_s)
             select $1, cluster_id, 14400 from cluster where name = 'west'",
        )
        .bind(hour)
        .execute(&live.app.pool)
        .await
        .unwrap();
        sqlx::query(
            "insert into usage_hour (budget_node_id, hour, cluster_id, charged_gpu_s,
                                     unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
             select b.budget_node_id, $1, c.cluster_id, $2, 0, $2, $2
             from budget_node b, cluster c where b.path = 'ai/olmo' and c.name = 'west'",
        )
        .bind(hour)
        .bind(gpu_s)
        .execute(&live.app.pool)
        .await
        .unwrap();
    }

    let (status, _, body) = scrape(&live, Some(METRICS_TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    let gpus = |cluster, state| {
        find(
            &scrape,
            "hourglass_gpus",
            &[("cluster", cluster), ("state", state)],
        )
    };
    assert_eq!(gpus("east", "allocated"), [2.0], "{body}");
    assert_eq!(gpus("east", "idle"), [0.0], "{body}");
    assert_eq!(gpus("west", "allocated"), [2.0], "{body}");
    assert_eq!(gpus("west", "idle"), [2.0], "{body}");
    assert_eq!(gpus("west", "unallocated"), [0.0], "{body}");
    assert!(
        gpus("default", "idle").is_empty(),
        "no GPU is in the default cluster: {body}"
    );
    let waiting = [("leaf", "ai/molmo"), ("kind", "allocated")];
    assert_eq!(
        find(
            &scrape,
            "hourglass_queue_workloads",
            &[waiting[0], waiting[1], ("cluster", "east")]
        ),
        [1.0],
        "{body}"
    );
    assert_eq!(
        find(&scrape, "hourglass_queue_workloads", &waiting),
        [1.0],
        "{body}"
    );
    let preempted = |cluster| {
        find(
            &scrape,
            "hourglass_preemptions_total",
            &[("cluster", cluster), ("rule", "free-work")],
        )
    };
    assert_eq!(preempted("west"), [1.0], "{body}");
    assert!(preempted("east").is_empty(), "{body}");
    // As the Budget tree shows each cluster's (read a moment later: running work adds a little).
    for cluster in ["east", "west"] {
        let ratio = find(
            &scrape,
            "hourglass_usage_ratio",
            &[("cluster", cluster), ("path", "ai/olmo")],
        );
        let (_, tree) = live
            .get("root", &format!("/api/v1/tree?cluster={cluster}"))
            .await;
        let page = tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == "ai/olmo")
            .and_then(|n| n["ratio"].as_f64())
            .unwrap();
        assert!(
            ratio
                .first()
                .is_some_and(|r| (r - page).abs() <= 0.05 * page.abs().max(0.01)),
            "{cluster}: the page says {page}: {body}"
        );
    }
    let delivered = find(
        &scrape,
        "hourglass_delivered_over_owed",
        &[("cluster", "west"), ("path", "ai/olmo")],
    );
    assert!(
        delivered.first().is_some_and(|r| *r > 0.5 && *r <= 1.0),
        "{body}"
    );
}

#[tokio::test]
async fn without_a_metrics_token_metrics_are_open() {
    let app = TestApp::new().await;
    let response = app.get("/metrics", None).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let scrape = Scrape::parse(response.body.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert_eq!(
        find(&scrape, "hourglass_gpus", &[("state", "idle")]),
        [0.0],
        "no nodes yet: {}",
        response.body
    );
}

#[test]
fn the_sample_grafana_dashboard_queries_only_metrics_the_server_exports() {
    let exported = [
        "hourglass_gpus",
        "hourglass_queue_workloads",
        "hourglass_usage_ratio",
        "hourglass_delivered_over_owed",
        "hourglass_preemptions_total",
        "hourglass_scheduler_pass_seconds_bucket",
        "hourglass_gpu_utilization",
        "hourglass_node_heartbeat_age_seconds",
        "hourglass_http_requests_total",
        "hourglass_http_request_duration_seconds_bucket",
    ];
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ops/grafana/hourglass.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut queried = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("hourglass_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(exported.contains(&name.as_str()), "{name} in {expr}");
                rest = &rest[at + name.len()..];
                queried.insert(name);
            }
        }
    }
    assert_eq!(
        queried.len(),
        exported.len(),
        "every metric has a panel: {queried:?}"
    );
}
