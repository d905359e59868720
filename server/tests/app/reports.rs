//! Reports against hand-computed values on a small fixture (DESIGN §5).

use crate::{live::ORG, support::TestApp};
use axum::{body::Body, http::Request};
use server::{
    api::tokens,
    budget::{import::import_org, org_file::OrgFile},
    reports::calendar::epoch_of,
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
    let h0 = epoch_of(2026, 1, 1);
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
    let token = tokens::create_token(&app.pool, root.user_id, "t")
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
    assert_eq!(
        lines[0],
        "bucket_start,path,funded_gpu_h,owed_gpu_h,delivered_gpu_h,unallocated_gpu_h"
    );
    assert_eq!(lines.len(), 1 + 2 * 3, "{}", response.body);
    assert!(
        lines.contains(&"2026-01-01T00:00:00Z,ai/olmo,3.0000,3.0000,4.0000,0.0000"),
        "{}",
        response.body
    );
    assert!(
        lines.contains(&"2026-01-01T01:00:00Z,ai/molmo,1.0000,0.0000,0.0000,1.0000"),
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
