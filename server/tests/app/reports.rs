//! Reports against hand-computed values on a small fixture (DESIGN §5).

use crate::{live::ORG, support::TestApp};
use app::calendar::epoch_of;
use axum::{
    body::Body,
    http::{Request, StatusCode},
};
use server::{
    budget::{import::import_org, org_file::OrgFile},
    tokens::service as tokens,
};

/// Two hours of Q1 2026 on 4 GPUs. ai/olmo (75%) bursts: it asks for 4 GPUs then 1 and gets
/// them; ai/molmo (25%) asks for 2 GPUs in the first hour and gets nothing, then runs free work.
async fn fixture() -> (TestApp, String, i64) {
    let app = TestApp::new().await;
    for name in ["root", "pat", "ada", "bob"] {
        app.create_user(name, "researcher", "long enough 1").await;
    }
    import_org(&app.pool, &OrgFile::parse(ORG).unwrap(), 0)
        .await
        .unwrap();
    let h0 = epoch_of(2026, 1, 1).unwrap();
    for hour in [h0, h0 + 3600] {
        sqlx::query("insert into capacity_hour (hour, healthy_gpu_s) values ($1, 14400)")
            .bind(hour)
            .execute(&app.pool)
            .await
            .unwrap();
    }
    // (path, hour, charged, unallocated, demand, owed = min(f·C, demand))
    let rows = [
        ("ai/olmo", h0, 14_400.0, 0.0, 14_400.0, 10_800.0),
        ("ai/olmo", h0 + 3600, 3_600.0, 0.0, 3_600.0, 3_600.0),
        ("ai/molmo", h0, 0.0, 0.0, 7_200.0, 3_600.0),
        ("ai/molmo", h0 + 3600, 0.0, 3_600.0, 0.0, 0.0),
    ];
    for (path, hour, charged, free, demand, owed) in rows {
        sqlx::query(
            "insert into usage_hour (budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
             select budget_node_id, $2, $3, $4, $5, $6 from budget_node where path = $1",
        )
        .bind(path)
        .bind(hour)
        .bind(charged)
        .bind(free)
        .bind(demand)
        .bind(owed)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let root = server::users::repo::find_user_by_username(&app.pool, "root")
        .await
        .unwrap()
        .unwrap();
    let token = tokens::create_token(&app.pool, root.user_id, "t", crate::support::now())
        .await
        .unwrap();
    (app, token, h0)
}

async fn get(app: &TestApp, token: &str, path: &str) -> crate::support::TestResponse {
    app.send(
        Request::get(path)
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn the_quarterly_review_caps_owed_by_demand_and_delivered_by_owed() {
    let (app, token, _) = fixture().await;
    let review = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    let h = &review["headline"];
    assert_eq!(
        h["delivered_over_owed"], 0.8,
        "(min(18000, 14400) + min(0, 3600)) / 18000"
    );
    assert_eq!(h["worst_team"], 0.0);
    assert_eq!(
        (h["teams"].as_u64(), h["teams_at_95pct"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(h["hourly"], 0.8, "(10800 + 3600 + 0) / 18000");
    assert_eq!(h["occupancy"], 0.75, "(18000 + 3600) / 28800");
    let row = |path: &str| {
        review["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap()
            .clone()
    };
    let olmo = row("ai/olmo");
    assert_eq!(
        (
            olmo["funded_gpu_h"].as_f64(),
            olmo["owed_gpu_h"].as_f64(),
            olmo["delivered_gpu_h"].as_f64()
        ),
        (Some(6.0), Some(4.0), Some(5.0))
    );
    assert_eq!(
        olmo["delivered_over_owed"], 1.25,
        "bursting shows above 1 per team"
    );
    let ai = row("ai");
    assert_eq!(
        (
            ai["funded_gpu_h"].as_f64(),
            ai["owed_gpu_h"].as_f64(),
            ai["delivered_gpu_h"].as_f64()
        ),
        (Some(8.0), Some(5.0), Some(5.0))
    );
    assert_eq!(row("ai/molmo")["unallocated_gpu_h"], 1.0);
}

#[tokio::test]
async fn the_quarterly_review_shows_the_share_in_force_over_the_quarter_and_where_it_changed() {
    let (app, token, h0) = fixture().await;
    // From the second hour on, olmo and molmo are funded equally (75% → 50% for olmo).
    let equal = ORG.replace("\"ai/olmo\" = 3", "\"ai/olmo\" = 1");
    import_org(&app.pool, &OrgFile::parse(&equal).unwrap(), h0 + 3600)
        .await
        .unwrap();
    let review = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    let olmo = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/olmo")
        .unwrap()
        .clone();
    assert_eq!(olmo["funded_gpu_h"], 5.0, "0.75 × 4 GPU-h + 0.5 × 4 GPU-h");
    assert_eq!(
        olmo["fraction"], 0.625,
        "the hours' shares weighted by capacity"
    );
    assert_eq!(
        (
            olmo["share_at_start"].as_f64(),
            olmo["share_at_end"].as_f64()
        ),
        (Some(0.75), Some(0.5))
    );
    let ai = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai")
        .unwrap()
        .clone();
    assert_eq!(
        ai["share_at_start"], ai["share_at_end"],
        "ai kept its share"
    );
    assert_eq!(
        review["data_since"], h0,
        "the first recorded hour bounds the year picker"
    );
}

#[tokio::test]
async fn the_quarterly_review_table_downloads_as_csv_with_every_column_the_page_shows() {
    let (app, token, _) = fixture().await;
    let response = get(
        &app,
        &token,
        "/api/v1/reports/quarter.csv?year=2026&quarter=1",
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.body);
    let lines: Vec<&str> = response.body.lines().collect();
    assert_eq!(lines[0], server::reports::review::CSV_HEADER);
    assert!(
        lines[0].contains("wait_p50_s,wait_p90_s") && lines[0].ends_with("mean_utilization"),
        "waits and utilization included"
    );
    assert_eq!(
        lines.len(),
        4,
        "a header and ai, ai/molmo, ai/olmo: {lines:?}"
    );
    assert_eq!(
        lines[3],
        "ai/olmo,0.7500,0.7500,0.7500,6.0000,4.0000,5.0000,1.2500,0.0000,,,,"
    );
    let response = get(
        &app,
        &token,
        "/api/v1/reports/quarter.csv?year=2026&quarter=5",
    )
    .await;
    assert_eq!(response.status, 422, "{}", response.body);
}

#[tokio::test]
async fn the_usage_csv_has_a_header_and_one_row_per_bucket_and_node() {
    let (app, token, h0) = fixture().await;
    let response = get(
        &app,
        &token,
        &format!(
            "/api/v1/reports/usage.csv?from={h0}&to={}&node=ai&granularity=hour",
            h0 + 7200
        ),
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.body);
    let lines: Vec<&str> = response.body.lines().collect();
    assert_eq!(lines[0], server::reports::usage::CSV_HEADER);
    assert_eq!(lines.len(), 1 + 2 * 3, "{}", response.body);
    assert!(
        lines.contains(&"2026-01-01T00:00:00Z,ai/olmo,3.0000,3.0000,4.0000,0.0000,,"),
        "{}",
        response.body
    );
    assert!(
        lines.contains(&"2026-01-01T01:00:00Z,ai/molmo,1.0000,0.0000,0.0000,1.0000,,"),
        "{}",
        response.body
    );
    let bad = get(
        &app,
        &token,
        "/api/v1/reports/usage.csv?granularity=fortnight",
    )
    .await;
    assert_eq!(bad.status, 422);
}

/// A day after `h0`, a second cluster of 4 GPUs beside the first: ai/olmo (75%) asks for all of
/// the first and gets it, ai/molmo (25%) all of the second, in that one hour. Returns the hour.
async fn two_clusters_busy_for_an_hour(app: &TestApp, h0: i64) -> i64 {
    let h1 = h0 + 86_400;
    sqlx::query("insert into cluster (name, created_at) values ('west', 0)")
        .execute(&app.pool)
        .await
        .unwrap();
    for cluster in ["default", "west"] {
        sqlx::query(
            "insert into capacity_hour (hour, cluster_id, healthy_gpu_s)
             select $1, cluster_id, 14400 from cluster where name = $2",
        )
        .bind(h1)
        .bind(cluster)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    // (path, cluster, charged = demand, owed as the ledger books it: min(f·C, demand))
    for (path, cluster, gpu_s, owed) in [
        ("ai/olmo", "default", 14_400.0, 10_800.0),
        ("ai/molmo", "west", 14_400.0, 3_600.0),
    ] {
        sqlx::query(
            "insert into usage_hour (budget_node_id, hour, cluster_id, charged_gpu_s,
                                     unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
             select b.budget_node_id, $2, c.cluster_id, $3, 0, $3, $4
             from budget_node b, cluster c where b.path = $1 and c.name = $5",
        )
        .bind(path)
        .bind(h1)
        .bind(gpu_s)
        .bind(owed)
        .bind(cluster)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    h1
}

#[tokio::test]
async fn with_two_clusters_the_usage_csv_owes_each_cluster_its_own_share_by_the_hour_and_by_the_day(
) {
    let (app, token, h0) = fixture().await;
    // Each is owed its share of its own cluster only.
    let h1 = two_clusters_busy_for_an_hour(&app, h0).await;
    // By the hour (from the ledger) and by the day (from the day's rollup), the same figures.
    for (granularity, to) in [("hour", h1 + 3600), ("day", h1 + 86_400)] {
        let response = get(
            &app,
            &token,
            &format!(
                "/api/v1/reports/usage.csv?from={h1}&to={to}&node=ai&granularity={granularity}"
            ),
        )
        .await;
        assert_eq!(response.status, 200, "{}", response.body);
        for line in [
            "2026-01-02T00:00:00Z,ai,8.0000,8.0000,8.0000,0.0000,,",
            "2026-01-02T00:00:00Z,ai/olmo,6.0000,3.0000,4.0000,0.0000,,",
            "2026-01-02T00:00:00Z,ai/molmo,2.0000,1.0000,4.0000,0.0000,,",
        ] {
            assert!(
                response.body.lines().any(|l| l == line),
                "by the {granularity}, {line}: {}",
                response.body
            );
        }
    }
    // A review of west alone has data since west's first hour; one of every cluster, since the
    // first cluster's.
    for (cluster, since) in [("&cluster=west", h1), ("", h0)] {
        let review = get(
            &app,
            &token,
            &format!("/api/v1/reports/quarter?year=2026&quarter=1{cluster}"),
        )
        .await
        .json();
        assert_eq!(review["data_since"], since, "{cluster}: {review}");
    }
    // A review of one cluster downloads under a name of its own.
    let csv = get(
        &app,
        &token,
        "/api/v1/reports/quarter.csv?year=2026&quarter=1&cluster=west",
    )
    .await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    assert!(
        csv.headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("\"hourglass-Q1-2026-west.csv\""),
        "{:?}",
        csv.headers
    );
}

#[tokio::test]
async fn the_usage_csv_of_one_cluster_counts_that_cluster_alone_by_the_hour_and_by_the_day() {
    let (app, token, h0) = fixture().await;
    let h1 = two_clusters_busy_for_an_hour(&app, h0).await;
    // (cluster, lines): funded, owed, delivered, unallocated GPU-hours.
    for (cluster, lines) in [
        (
            "west",
            [
                "2026-01-02T00:00:00Z,ai,4.0000,4.0000,4.0000,0.0000,,",
                "2026-01-02T00:00:00Z,ai/olmo,3.0000,0.0000,0.0000,0.0000,,",
                "2026-01-02T00:00:00Z,ai/molmo,1.0000,1.0000,4.0000,0.0000,,",
            ],
        ),
        (
            "default",
            [
                "2026-01-02T00:00:00Z,ai,4.0000,4.0000,4.0000,0.0000,,",
                "2026-01-02T00:00:00Z,ai/olmo,3.0000,3.0000,4.0000,0.0000,,",
                "2026-01-02T00:00:00Z,ai/molmo,1.0000,0.0000,0.0000,0.0000,,",
            ],
        ),
    ] {
        for (granularity, to) in [("hour", h1 + 3600), ("day", h1 + 86_400)] {
            let response = get(
                &app,
                &token,
                &format!(
                    "/api/v1/reports/usage.csv?from={h1}&to={to}&node=ai&granularity={granularity}&cluster={cluster}"
                ),
            )
            .await;
            assert_eq!(response.status, 200, "{}", response.body);
            for line in lines {
                assert!(
                    response.body.lines().any(|l| l == line),
                    "{cluster} by the {granularity}, {line}: {}",
                    response.body
                );
            }
            assert!(
                response.headers["content-disposition"]
                    .to_str()
                    .unwrap()
                    .contains(&format!("\"hourglass-usage-{cluster}.csv\"")),
                "{:?}",
                response.headers
            );
        }
    }
    let unknown = get(&app, &token, "/api/v1/reports/usage.csv?cluster=east").await;
    assert_eq!(unknown.status, 422, "{}", unknown.body);
    assert_eq!(
        unknown.json()["error"],
        "There is no cluster \"east\".",
        "{}",
        unknown.body
    );
}

#[tokio::test]
async fn dates_in_epoch_seconds_and_in_iso_8601_give_the_same_usage_csv() {
    let (app, token, h0) = fixture().await;
    let epoch = get(
        &app,
        &token,
        &format!(
            "/api/v1/reports/usage.csv?from={h0}&to={}&granularity=hour",
            h0 + 7200
        ),
    )
    .await;
    assert_eq!(epoch.status, 200, "{}", epoch.body);
    for (from, to) in [
        ("2026-01-01", "2026-01-01T02:00:00Z"),
        ("2026-01-01T00:00:00Z", "2026-01-01T03:00:00%2B01:00"),
    ] {
        let iso = get(
            &app,
            &token,
            &format!("/api/v1/reports/usage.csv?from={from}&to={to}&granularity=hour"),
        )
        .await;
        assert_eq!(iso.status, 200, "{}", iso.body);
        assert_eq!(iso.body, epoch.body, "from={from} to={to}");
    }
    assert!(epoch.body.lines().count() > 1, "{}", epoch.body);
}

#[tokio::test]
async fn a_date_that_does_not_read_is_refused_with_the_name_of_its_parameter() {
    let (app, token, _) = fixture().await;
    for (query, field) in [
        ("usage.csv?from=2026-13-01", "from"),
        ("usage.csv?from=2026-01-01&to=yesterday", "to"),
        ("usage.csv?to=2026-01-01T00:00:00", "to"),
        ("review?from=2026-01-01", "to"),
        ("review?from=2026-02-01&to=2026-01-01", "to"),
        ("review.csv?from=1st%20of%20May&to=2026-06-01", "from"),
    ] {
        let response = get(&app, &token, &format!("/api/v1/reports/{query}")).await;
        assert_eq!(response.status, 422, "{query}: {}", response.body);
        let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(body["field"], field, "{query}: {body}");
        let message = body["error"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}:")),
            "{query}: {message}"
        );
    }
}

#[tokio::test]
async fn a_review_covers_any_period_and_a_quarter_read_as_a_period_is_the_quarter() {
    let (app, token, _) = fixture().await;
    let quarter = get(
        &app,
        &token,
        "/api/v1/reports/quarter.csv?year=2026&quarter=1",
    )
    .await;
    let period = get(
        &app,
        &token,
        "/api/v1/reports/review.csv?from=2026-01-01&to=2026-04-01",
    )
    .await;
    assert_eq!(period.status, 200, "{}", period.body);
    assert_eq!(period.body, quarter.body);
    // The first hour alone: ai/olmo ran 4 GPU-h of the 3 it was owed.
    let hour = get(
        &app,
        &token,
        "/api/v1/reports/review?from=2026-01-01T00:00:00Z&to=2026-01-01T01:00:00Z",
    )
    .await;
    assert_eq!(hour.status, 200, "{}", hour.body);
    let review: serde_json::Value = serde_json::from_str(&hour.body).unwrap();
    assert_eq!(review["label"], "2026-01-01 to 2026-01-01");
    let olmo = review["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/olmo")
        .unwrap();
    assert_eq!(olmo["delivered_gpu_h"], 4.0, "{olmo}");
    assert_eq!(olmo["owed_gpu_h"], 3.0, "{olmo}");
}

#[tokio::test]
async fn a_node_path_with_a_comma_and_a_leading_equals_sign_round_trips_safely_through_the_csv() {
    let (app, token, h0) = fixture().await;
    let risky = "=HYPERLINK(\"x\",\"y\"),z";
    let org = ORG.replacen(
        "[shares]\n",
        &format!("[shares]\n{} = 1\n", toml_key(risky)),
        1,
    );
    import_org(&app.pool, &OrgFile::parse(&org).unwrap(), h0)
        .await
        .unwrap();
    let quarter = get(
        &app,
        &token,
        "/api/v1/reports/quarter.csv?year=2026&quarter=1",
    )
    .await;
    let usage = get(
        &app,
        &token,
        &format!(
            "/api/v1/reports/usage.csv?from={h0}&to={}&granularity=hour",
            h0 + 3600
        ),
    )
    .await;
    for (what, response, column) in [("review", &quarter, 0), ("usage", &usage, 1)] {
        assert_eq!(response.status, 200, "{what}: {}", response.body);
        let paths: Vec<String> = csv::Reader::from_reader(response.body.as_bytes())
            .records()
            .map(|r| r.unwrap()[column].to_string())
            .collect();
        assert!(
            paths.contains(&format!("'{risky}")),
            "{what}: the path reads back whole, after a quote that stops a spreadsheet running it: {paths:?}"
        );
        assert!(
            paths.iter().all(|p| !p.starts_with('=')),
            "{what}: {paths:?}"
        );
        assert!(paths.contains(&"ai".to_string()), "{what}: {paths:?}");
    }
}

/// A TOML key for any text.
fn toml_key(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[tokio::test]
async fn a_late_booking_into_a_rolled_up_day_is_counted_on_the_next_read() {
    let (app, token, h0) = fixture().await;
    let before = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    let molmo = |r: &serde_json::Value| {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["path"] == "ai/molmo")
            .unwrap()["delivered_gpu_h"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(molmo(&before), 0.0);
    let leaf: i64 =
        sqlx::query_scalar("select budget_node_id from budget_node where path = 'ai/molmo'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    // An agent's late report: one GPU from 01:00 on January 1st until just after midnight.
    let mut db = app.pool.acquire().await.unwrap();
    server::runtime::ledger::book(
        &mut db,
        1,
        leaf,
        server::runtime::ledger::Column::Charged,
        1.0,
        h0 + 3600,
        h0 + 86_400 + 60,
    )
    .await
    .unwrap();
    drop(db);
    let after = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    assert_eq!(molmo(&after), (86_400.0 - 3600.0 + 60.0) / 3600.0);
}

/// Two workloads on 8-GPU hosts, hour by hour from `h0`: a debug workload (1 GPU, 10 min minimum)
/// waits 10 min, runs 20 min, is preempted, waits 20 min and finishes; a large one (16 GPUs)
/// waits two hours. A drain happens in the second hour.
#[tokio::test]
async fn cluster_activity_counts_queue_depth_waits_and_preemptions_per_bucket() {
    let (app, _token, h0) = fixture().await;
    let lee = {
        app.create_user("lee", "leadership", "long enough 1").await;
        app.sign_in("lee", "long enough 1").await
    };
    for (i, name) in ["h-0", "h-1"].iter().enumerate() {
        sqlx::query(
            "insert into node (name, gpu_count, token_hash, registered_at) values ($1, 8, $2, 0)",
        )
        .bind(name)
        .bind(format!("hash-{i}"))
        .execute(&app.pool)
        .await
        .unwrap();
    }
    // (gpus, min_runtime_s, submitted, first_started, ended)
    for (gpus, min_runtime, first, ended) in [
        (1, 600, h0 + 600, h0 + 3600),
        (16, 3600, h0 + 7200, h0 + 10_800),
    ] {
        sqlx::query(
            "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s, resumable, state,
                                   submitted_at, queued_at, first_started_at, started_at, ended_at, run_count)
             select 1, budget_node_id, 'w', 'true', $1, $2, 1, 'succeeded', $3, $3, $4, $4, $5, 1
             from budget_node where path = 'ai/olmo'",
        )
        .bind(gpus)
        .bind(min_runtime)
        .bind(h0)
        .bind(first)
        .bind(ended)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    // (workload, node, start, end, end kind)
    for (w, node, start, end, kind) in [
        (1, 1, h0 + 600, h0 + 1800, "preempted"),
        (1, 1, h0 + 3000, h0 + 3600, "completed"),
        (2, 1, h0 + 7200, h0 + 10_800, "completed"),
        (2, 2, h0 + 7200, h0 + 10_800, "completed"),
    ] {
        sqlx::query(
            "insert into workload_run (workload_id, node_id, gpu_indices, gpus, allocated, started_at, charged_through, ended_at, end_kind)
             values ($1, $2, '0', 1, 1, $3, $4, $4, $5)",
        )
        .bind(w)
        .bind(node)
        .bind(start)
        .bind(end)
        .bind(kind)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    for (at, kind, rule) in [
        (h0 + 1800, "preempted", "fair-share"),
        (h0 + 5000, "drained", "host-cordoned"),
    ] {
        sqlx::query(
            "insert into workload_event (workload_id, at, kind, detail) values (1, $1, $2, $3)",
        )
        .bind(at)
        .bind(kind)
        .bind(format!("{{\"rule\":\"{rule}\"}}"))
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let response = app
        .post_form(
            "/api/reports/activity",
            &[
                ("from", h0.to_string().as_str()),
                ("to", (h0 + 4 * 3600).to_string().as_str()),
                ("granularity", "hour"),
            ],
            Some(&lee),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let a = response.json();
    assert_eq!(a["buckets"].as_array().unwrap().len(), 4);
    // Hour 0: the debug workload waits 600 + 1200 s, the large one 3600 s.
    assert_eq!(a["queue_depth"], serde_json::json!([1.5, 1.0, 0.0, 0.0]));
    assert_eq!(a["queued_gpus"], serde_json::json!([16.5, 16.0, 0.0, 0.0]));
    // Both waited at once in hour 0, the large one alone in hour 1.
    assert_eq!(a["queue_peak"], serde_json::json!([2, 1, 0, 0]));
    let class = |name: &str| {
        a["waits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["class"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        class("all")["p90_s"],
        serde_json::json!([600, null, 7200, null])
    );
    assert_eq!(
        class("debug")["p50_s"],
        serde_json::json!([600, null, null, null])
    );
    assert_eq!(
        class("large")["p50_s"],
        serde_json::json!([null, null, 7200, null])
    );
    assert_eq!(
        a["preemptions"],
        serde_json::json!([
            {"reason": "fair-share", "counts": [1, 0, 0, 0]},
            {"reason": "host-cordoned", "counts": [0, 1, 0, 0]},
        ])
    );
    let bad = app
        .post_form(
            "/api/reports/activity",
            &[
                ("from", "0"),
                ("to", (90 * 86_400).to_string().as_str()),
                ("granularity", "hour"),
            ],
            Some(&lee),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains("31 days"), "{}", bad.body);
}

#[tokio::test]
async fn the_quarterly_review_gives_each_program_the_waits_of_every_project_under_it() {
    let (app, token, h0) = fixture().await;
    // (project, person, wait in seconds) of workloads submitted in the first hour of Q1 2026.
    for (path, person, wait) in [
        ("ai/olmo", "ada", 60),
        ("ai/olmo", "ada", 120),
        ("ai/olmo", "ada", 600),
        ("ai/molmo", "bob", 3_600),
    ] {
        sqlx::query(
            "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s,
                                   resumable, priority, state, submitted_at, queued_at,
                                   first_started_at, started_at, ended_at)
             select u.user_id, b.budget_node_id, 'w', 'true', 1, 900, 0, 0, 'succeeded',
                    $3, $3, $3 + $4, $3 + $4, $3 + $4 + 60
             from \"user\" u, budget_node b where u.username = $1 and b.path = $2",
        )
        .bind(person)
        .bind(path)
        .bind(h0 + 10)
        .bind(wait)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let review = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    let waits = |path: &str| {
        let row = review["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap()
            .clone();
        (row["wait_p50_s"].as_i64(), row["wait_p90_s"].as_i64())
    };
    assert_eq!(waits("ai/olmo"), (Some(120), Some(600)));
    assert_eq!(waits("ai/molmo"), (Some(3_600), Some(3_600)));
    assert_eq!(
        waits("ai"),
        (Some(120), Some(3_600)),
        "the program's waits are its projects' together: 60, 120, 600, 3600"
    );
}

#[tokio::test]
async fn usage_by_day_from_the_daily_rollups_equals_the_hourly_ledger_summed_by_day() {
    use server::reports::usage::{series, Granularity};
    use std::collections::BTreeMap;
    let (app, _token, h0) = fixture().await;
    // A third day with usage, and a day between with none.
    sqlx::query("insert into capacity_hour (hour, healthy_gpu_s) values ($1, 14400)")
        .bind(h0 + 2 * 86_400 + 7_200)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into usage_hour (budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
         select budget_node_id, $1, 7200, 1800, 9000, 3600 from budget_node where path = 'ai/molmo'",
    )
    .bind(h0 + 2 * 86_400 + 7_200)
    .execute(&app.pool)
    .await
    .unwrap();
    let now = crate::support::now();
    for node in ["", "ai"] {
        // From the middle of the day before: that partial day comes from the ledger.
        let (from, to) = (h0 - 6 * 3_600, h0 + 3 * 86_400);
        let by_day = series(&app.pool, node, None, from, to, Granularity::Day, now)
            .await
            .unwrap();
        let by_hour = series(&app.pool, node, None, from, to, Granularity::Hour, now)
            .await
            .unwrap();
        let mut summed: BTreeMap<(i64, String), [f64; 4]> = BTreeMap::new();
        for ((hour, path), cell) in by_hour {
            let day = hour.div_euclid(86_400) * 86_400;
            let sum = summed.entry((day, path)).or_insert([0.0; 4]);
            for (s, c) in sum.iter_mut().zip(cell) {
                *s += c;
            }
        }
        assert_eq!(by_day.len(), summed.len(), "{node}: {by_day:?}");
        for (key, cell) in &by_day {
            let expected = summed[key];
            for (a, b) in cell.iter().zip(expected) {
                assert!(
                    (a - b).abs() < 1e-9,
                    "{node} {key:?}: {cell:?} against {expected:?}"
                );
            }
        }
        let rolled: i64 = sqlx::query_scalar("select count(*) from rollup_day")
            .fetch_one(&app.pool)
            .await
            .unwrap();
        assert_eq!(
            rolled, 3,
            "the three whole days were rolled up and read from there"
        );
        let delivered: f64 = by_day
            .iter()
            .filter(|((_, path), _)| path == node)
            .map(|(_, c)| c[2])
            .sum();
        assert_eq!(
            delivered, 7.0,
            "{node}: 5 GPU-h on the first day and 2 on the third"
        );
    }
}

#[tokio::test]
async fn review_waits_come_from_rolled_up_days_today_and_the_workloads_still_waiting() {
    use server::reports::waits::submitted_between;
    let (app, _token, h0) = fixture().await;
    let day = 86_400;
    let now = epoch_of(2026, 3, 15).unwrap() + 12 * 3_600;
    // (submitted, first start, min runtime, gpus)
    let rows: [(i64, Option<i64>, i64, i64); 5] = [
        (h0 + 9 * day + 36_000, Some(h0 + 9 * day + 36_300), 3_600, 8),
        (now - 13 * 3_600, Some(now - 11 * 3_600), 3_600, 8),
        (now - 6 * 3_600, None, 3_600, 8),
        (h0 - 3_600, Some(h0 + 60), 3_600, 8),
        (h0 + 31 * day, Some(h0 + 31 * day + 30), 300, 1),
    ];
    for (submitted, started, min_runtime, gpus) in rows {
        sqlx::query(
            "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s,
                                   resumable, priority, state, submitted_at, queued_at,
                                   first_started_at)
             select u.user_id, b.budget_node_id, 'w', 'true', $3, $4, 0, 0, 'queued', $1, $1, $2
             from \"user\" u, budget_node b where u.username = 'ada' and b.path = 'ai/olmo'",
        )
        .bind(submitted)
        .bind(started)
        .bind(gpus)
        .bind(min_runtime)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let (from, to) = server::reports::calendar::quarter(2026, 1).unwrap();
    let mut db = app.pool.acquire().await.unwrap();
    for read in 0..2 {
        let mut waits: Vec<(i64, bool)> = submitted_between(&mut db, from, to, now)
            .await
            .unwrap()
            .into_iter()
            .map(|w| (w.wait_s, w.debug))
            .collect();
        waits.sort_unstable();
        assert_eq!(
            waits,
            [(30, true), (300, false), (7_200, false), (21_600, false)],
            "read {read}: a past day's start, a debug run, today's start, one still waiting \
             until now; the one submitted before the quarter is not counted"
        );
    }
    let rolled: Vec<i64> = sqlx::query_scalar("select day from wait_rollup_day order by day")
        .fetch_all(&mut *db)
        .await
        .unwrap();
    assert_eq!(
        (rolled.first(), rolled.last(), rolled.len()),
        (Some(&h0), Some(&(now - 12 * 3_600 - day)), 73),
        "every day of the quarter before today, once"
    );
}

#[tokio::test]
async fn two_readers_rolling_up_the_same_days_at_once_both_succeed_with_the_same_rollup() {
    let test_db = crate::support::TestDb::new().await;
    let pool = server::db::open(&test_db.url).await.unwrap();
    let now = crate::support::now();
    server::demo::prepare(&pool, now).await.unwrap();
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let first = now - 40 * scheduler::DAY;
    let mut a = pool.acquire().await.unwrap();
    let mut b = pool.acquire().await.unwrap();
    server::reports::waits::ensure(&mut a, first, now)
        .await
        .unwrap();
    let before = count("select count(*) from wait_day").await;
    assert!(before > 0, "the demo's month is rolled up");
    for table in ["wait_day", "wait_rollup_day"] {
        sqlx::query(&format!("delete from {table}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let (ra, rb) = tokio::join!(
        server::reports::waits::ensure(&mut a, first, now),
        server::reports::waits::ensure(&mut b, first, now),
    );
    ra.unwrap();
    rb.unwrap();
    assert_eq!(count("select count(*) from wait_day").await, before);

    // The same for the usage rollups.
    let tree = server::budget::snapshot::load(&mut a)
        .await
        .unwrap()
        .unwrap();
    server::reports::rollup::ensure(&mut a, &tree, first, now, now)
        .await
        .unwrap();
    let before = count("select count(*) from node_day").await;
    assert!(before > 0, "the demo's month is rolled up");
    for table in ["node_day", "rollup_day"] {
        sqlx::query(&format!("delete from {table}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let (ra, rb) = tokio::join!(
        server::reports::rollup::ensure(&mut a, &tree, first, now, now),
        server::reports::rollup::ensure(&mut b, &tree, first, now, now),
    );
    ra.unwrap();
    rb.unwrap();
    assert_eq!(count("select count(*) from node_day").await, before);
}

#[tokio::test]
async fn without_a_year_and_quarter_the_review_is_this_quarter_and_half_a_pair_is_refused() {
    let (app, token, _) = fixture().await;
    let review = get(&app, &token, "/api/v1/reports/quarter").await;
    assert_eq!(review.status, 200, "{}", review.body);
    let review = review.json();
    let (year, quarter) = app::calendar::quarter_of(app.runtime.now());
    assert_eq!(review["quarter"], serde_json::json!([year, quarter]));
    assert_eq!(review["label"], format!("Q{quarter} {year}"));
    assert_eq!(review["fiscal_start_month"], 1);
    for (query, field) in [("year=2026", "quarter"), ("quarter=2", "year")] {
        let refused = get(&app, &token, &format!("/api/v1/reports/quarter?{query}")).await;
        assert_eq!(refused.status, 422, "{query}: {}", refused.body);
        assert_eq!(refused.json()["field"], field, "{query}");
    }
    let period = get(
        &app,
        &token,
        "/api/v1/reports/review?from=2026-01-01&to=2026-02-01",
    )
    .await
    .json();
    assert_eq!(period["quarter"], serde_json::Value::Null, "not a quarter");
}

#[tokio::test]
async fn the_trend_puts_each_nodes_quarters_side_by_side_from_the_first_with_data() {
    let (app, token, _) = fixture().await;
    let trend = get(
        &app,
        &token,
        "/api/v1/reports/trend?year=2026&quarter=3&quarters=8",
    )
    .await;
    assert_eq!(trend.status, 200, "{}", trend.body);
    let trend = trend.json();
    let labels: Vec<&str> = trend["quarters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["Q1 2026", "Q2 2026", "Q3 2026"],
        "nothing was recorded before 2026"
    );
    assert_eq!(trend["quarters"][0]["delivered_over_owed"], 0.8);
    let olmo = trend["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "ai/olmo")
        .unwrap();
    assert_eq!(olmo["cells"][0]["delivered_gpu_h"], 5.0);
    assert_eq!(olmo["cells"][0]["owed_gpu_h"], 4.0);
    assert_eq!(olmo["cells"][1]["delivered_gpu_h"], 0.0, "nothing in Q2");

    let csv = get(
        &app,
        &token,
        "/api/v1/reports/trend.csv?year=2026&quarter=2&quarters=2",
    )
    .await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    assert!(
        csv.headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("hourglass-trend-Q2-2026.csv"),
        "{:?}",
        csv.headers
    );
    let lines: Vec<&str> = csv.body.lines().collect();
    assert_eq!(lines[0], server::reports::trend::CSV_HEADER);
    assert!(
        lines.contains(&"ai/olmo,Q1 2026,2026-01-01,4.0000,5.0000,1.2500,"),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"ai/olmo,Q2 2026,2026-04-01,0.0000,0.0000,,"),
        "{lines:?}"
    );

    for (query, field) in [
        ("quarters=9", "quarters"),
        ("quarters=0", "quarters"),
        ("year=2026", "quarter"),
    ] {
        let refused = get(&app, &token, &format!("/api/v1/reports/trend?{query}")).await;
        assert_eq!(refused.status, 422, "{query}: {}", refused.body);
        assert_eq!(refused.json()["field"], field, "{query}");
    }
}

#[tokio::test]
async fn the_quarterly_review_reads_utilization_from_the_daily_rollups_as_the_ledger_has_it() {
    let (app, token, h0) = fixture().await;
    // GPU time sampled on ai/olmo in both of its hours: 4,500 of 10,800 GPU-seconds busy.
    for (hour, sampled, utilized) in [(h0, 7_200.0, 3_600.0), (h0 + 3600, 3_600.0, 900.0)] {
        sqlx::query(
            "update usage_hour set sampled_gpu_s = $2, utilized_gpu_s = $3
             where hour = $1 and budget_node_id = (select budget_node_id from budget_node where path = 'ai/olmo')",
        )
        .bind(hour)
        .bind(sampled)
        .bind(utilized)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let review = get(&app, &token, "/api/v1/reports/quarter?year=2026&quarter=1")
        .await
        .json();
    let rolled: i64 = sqlx::query_scalar("select count(*) from node_day where sampled_gpu_s > 0")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(rolled > 0, "the day was rolled up with its samples");
    let row = |path: &str| {
        review["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap()
            .clone()
    };
    for path in ["ai/olmo", "ai"] {
        let utilization = row(path)["utilization"].as_f64().unwrap();
        assert!(
            (utilization - 4_500.0 / 10_800.0).abs() < 1e-9,
            "{path}: {utilization}"
        );
        assert!((row(path)["utilized_gpu_h"].as_f64().unwrap() - 1.25).abs() < 1e-9);
    }
    assert!(row("ai/molmo")["utilization"].is_null());
    let headline = review["headline"]["utilization"].as_f64().unwrap();
    assert!((headline - 4_500.0 / 10_800.0).abs() < 1e-9, "{headline}");
}
