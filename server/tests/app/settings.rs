//! The Settings page's server functions: admin only, validated, applied live, audited.

use crate::support::TestApp;
use axum::http::StatusCode;

const FORM: [(&str, &str); 5] = [
    ("window_days", "3"),
    ("max_min_runtime_hours", "4"),
    ("damping_margin", "0.05"),
    ("heartbeat_deadline_s", "45"),
    ("grace_s", "20"),
];

#[tokio::test]
async fn an_admin_changes_settings_which_apply_live_and_are_audited() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let response = app
        .post_form("/api/settings/update", &FORM, Some(&admin))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let config = app.runtime.config();
    assert_eq!(
        (config.window, config.max_min_runtime, config.grace),
        (3 * 86_400, 4 * 3600, 20)
    );
    assert_eq!(config.damping_margin, 0.05);
    let audited: i64 = sqlx::query_scalar("select count(*) from setting_change")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(audited, 5);
    let reloaded = server::settings::load(&app.pool, Default::default())
        .await
        .unwrap();
    assert_eq!(
        reloaded.heartbeat_deadline, 45,
        "stored settings survive a restart"
    );
}

#[tokio::test]
async fn researchers_cannot_change_settings_and_bad_values_change_nothing() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    app.create_user("ada", "researcher", "long enough 1").await;
    let researcher = app.sign_in("ada", "long enough 1").await;
    let refused = app
        .post_form("/api/settings/update", &FORM, Some(&researcher))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let admin = app.sign_in("root", "long enough 1").await;
    let mut bad = FORM;
    bad[2] = ("damping_margin", "lots");
    let invalid = app
        .post_form("/api/settings/update", &bad, Some(&admin))
        .await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(invalid.body.contains("damping_margin"), "{}", invalid.body);
    let defaults = server::runtime::config::RuntimeConfig::default();
    assert_eq!(
        app.runtime.config().window,
        defaults.window,
        "no field changed"
    );
    assert_eq!(app.runtime.config().damping_margin, defaults.damping_margin);
    let changed: i64 = sqlx::query_scalar("select count(*) from setting")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(changed, 0);
}

#[tokio::test]
async fn a_minimum_runtime_cap_too_small_for_any_funded_work_is_refused() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let mut zero = FORM;
    zero[1] = ("max_min_runtime_hours", "0");
    let refused = app
        .post_form("/api/settings/update", &zero, Some(&admin))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused
            .body
            .contains("The minimum-runtime cap (hours) must be between 0.25 and 168."),
        "{}",
        refused.body
    );
    let defaults = server::runtime::config::RuntimeConfig::default();
    assert_eq!(
        app.runtime.config().max_min_runtime,
        defaults.max_min_runtime
    );
}

#[tokio::test]
async fn the_history_reads_in_the_forms_units_with_the_reason_given_and_a_long_reason_changes_nothing(
) {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let long = "x".repeat(501);
    let mut with_long = FORM.to_vec();
    with_long.push(("reason", &long));
    let refused = app
        .post_form("/api/settings/update", &with_long, Some(&admin))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("500 characters"), "{}", refused.body);
    assert_eq!(
        app.runtime.config().window,
        server::runtime::config::RuntimeConfig::default().window,
        "nothing changed"
    );

    let mut form = FORM.to_vec();
    form.push(("reason", "  Longer memory for the spring deadline  "));
    let saved = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    let view: serde_json::Value = serde_json::from_str(&saved.body).unwrap();
    let window = view["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "window_s")
        .expect("the window's change is in the history");
    assert_eq!(window["label"], "Lookback window (days)");
    assert_eq!(
        window["new_value"], "3",
        "days, as typed, not 259200 seconds"
    );
    assert_eq!(window["reason"], "Longer memory for the spring deadline");
    let cap = view["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "max_min_runtime_s")
        .unwrap();
    assert_eq!(cap["new_value"], "4");
}

#[tokio::test]
async fn a_fiscal_year_starting_in_october_names_and_bounds_the_reviews_quarters() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let mut form = FORM.to_vec();
    form.push(("fiscal_start_month", "13"));
    let refused = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("fiscal_start_month"),
        "{}",
        refused.body
    );
    assert_eq!(
        app.runtime.config().fiscal_start_month,
        1,
        "nothing changed"
    );

    form.pop();
    form.push(("fiscal_start_month", "10"));
    let saved = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    assert_eq!(app.runtime.config().fiscal_start_month, 10);
    let review = app
        .post_form(
            "/api/reports/quarter",
            &[("year", "2027"), ("quarter", "1")],
            Some(&admin),
        )
        .await;
    assert_eq!(review.status, StatusCode::OK, "{}", review.body);
    let review: serde_json::Value = serde_json::from_str(&review.body).unwrap();
    assert_eq!(review["label"], "Q1 FY2027");
    assert_eq!(review["quarter"], serde_json::json!([2027, 1]));
    assert_eq!(
        review["fiscal_start_month"], 10,
        "the page offers fiscal quarters"
    );
    let this = app
        .post_form("/api/reports/quarter", &[], Some(&admin))
        .await
        .json();
    let now = app::calendar::Fiscal::starting(10)
        .unwrap()
        .quarter_of(app.runtime.now());
    assert_eq!(
        this["quarter"],
        serde_json::json!([now.0, now.1]),
        "without a quarter, this fiscal quarter"
    );
    assert_eq!(
        (review["from"].as_i64(), review["to"].as_i64()),
        (
            app::calendar::epoch_of(2026, 10, 1),
            app::calendar::epoch_of(2027, 1, 1)
        )
    );
    let reloaded = server::settings::load(&app.pool, Default::default())
        .await
        .unwrap();
    assert_eq!(reloaded.fiscal_start_month, 10, "it survives a restart");
}

#[tokio::test]
async fn the_kill_margin_applies_to_the_engine_and_is_never_below_the_damping_margin() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let default = server::runtime::config::RuntimeConfig::default().kill_margin;
    assert_eq!(default, scheduler::Config::default().kill_margin);

    let mut form = FORM.to_vec();
    form.push(("kill_margin", "0.01"));
    let refused = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("kill_margin"), "{}", refused.body);
    assert!(
        refused.body.contains("at least the damping margin (0.05)"),
        "{}",
        refused.body
    );
    assert_eq!(app.runtime.config().kill_margin, default, "nothing changed");
    assert_eq!(app.runtime.config().damping_margin, 0.02, "nothing changed");

    form.pop();
    form.push(("kill_margin", "0.5"));
    let saved = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    assert_eq!(app.runtime.config().kill_margin, 0.5);
    assert_eq!(app.runtime.config().engine_config().kill_margin, 0.5);
    assert!(
        saved.body.contains("Kill margin (work that cannot resume)"),
        "{}",
        saved.body
    );
    let reloaded = server::settings::load(&app.pool, Default::default())
        .await
        .unwrap();
    assert_eq!(
        reloaded.kill_margin, 0.5,
        "stored settings survive a restart"
    );

    // A client that leaves the field out keeps the margin as it is.
    let kept = app
        .post_form("/api/settings/update", &FORM, Some(&admin))
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);
    assert_eq!(app.runtime.config().kill_margin, 0.5);
}

#[tokio::test]
async fn the_fast_lane_and_headroom_apply_to_the_engine_and_the_peak_is_never_below_the_share() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let defaults = scheduler::Config::default();
    let lane = |config: &server::runtime::config::RuntimeConfig| {
        let engine = config.engine_config();
        (
            engine.fast_lane,
            engine.fast_lane_peak,
            engine.fast_lane_window,
            engine.headroom_max_fraction,
        )
    };
    let default_lane = (
        defaults.fast_lane,
        defaults.fast_lane_peak,
        defaults.fast_lane_window,
        defaults.headroom_max_fraction,
    );
    assert_eq!(lane(&app.runtime.config()), default_lane);

    for (field, value, says) in [
        (
            "fast_lane_peak",
            "0.05",
            "at least its share (0.1), not 0.05",
        ),
        (
            "fast_lane",
            "0.6",
            "The fast lane share must be between 0 and 0.5",
        ),
        (
            "fast_lane_window_minutes",
            "half an hour",
            "Enter the fast lane window (minutes) as a number, not",
        ),
        (
            "headroom_fraction",
            "0.3",
            "The headroom for debug work must be between 0 and 0.2",
        ),
    ] {
        let mut form = FORM.to_vec();
        form.push((field, value));
        let refused = app
            .post_form("/api/settings/update", &form, Some(&admin))
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert!(refused.body.contains(field), "{}", refused.body);
        assert!(refused.body.contains(says), "{}", refused.body);
        assert_eq!(lane(&app.runtime.config()), default_lane, "nothing changed");
        assert_eq!(app.runtime.config().grace, 10, "nothing changed");
    }

    let mut form = FORM.to_vec();
    form.extend([
        ("fast_lane", "0.05"),
        ("fast_lane_peak", "0.15"),
        ("fast_lane_window_minutes", "90"),
        ("headroom_fraction", "0"),
    ]);
    let saved = app
        .post_form("/api/settings/update", &form, Some(&admin))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    assert_eq!(lane(&app.runtime.config()), (0.05, 0.15, 5_400, 0.0));
    assert!(
        saved.body.contains("Fast lane window (minutes)"),
        "the history names the change in the form's words: {}",
        saved.body
    );
    let reloaded = server::settings::load(&app.pool, Default::default())
        .await
        .unwrap();
    assert_eq!(
        lane(&reloaded),
        (0.05, 0.15, 5_400, 0.0),
        "stored settings survive a restart"
    );

    // A client that leaves the fields out keeps the lane as it is.
    let kept = app
        .post_form("/api/settings/update", &FORM, Some(&admin))
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);
    assert_eq!(lane(&app.runtime.config()), (0.05, 0.15, 5_400, 0.0));
}
