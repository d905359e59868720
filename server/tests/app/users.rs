use crate::support::TestApp;
use axum::http::StatusCode;

async fn app_with_people() -> (TestApp, String, String, String) {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "admin password").await;
    app.create_user("lee", "leadership", "leader password")
        .await;
    app.create_user("ada", "researcher", "correct horse").await;
    let admin = app.sign_in("root", "admin password").await;
    let leader = app.sign_in("lee", "leader password").await;
    let researcher = app.sign_in("ada", "correct horse").await;
    (app, admin, leader, researcher)
}

async fn user_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from \"user\"")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn only_admins_may_list_users() {
    let (app, admin, leader, researcher) = app_with_people().await;
    for cookie in [&leader, &researcher] {
        let response = app.post_form("/api/users/list", &[], Some(cookie)).await;
        assert_eq!(response.status, StatusCode::FORBIDDEN, "{}", response.body);
    }
    let response = app.post_form("/api/users/list", &[], Some(&admin)).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let names: Vec<String> = response
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap().into())
        .collect();
    assert_eq!(names, ["ada", "lee", "root"]);
}

#[tokio::test]
async fn non_admins_cannot_create_users_and_nothing_is_written() {
    let (app, _admin, leader, researcher) = app_with_people().await;
    for cookie in [&leader, &researcher] {
        let response = app
            .post_form(
                "/api/users/create",
                &[
                    ("username", "mallory"),
                    ("role", "admin"),
                    ("password", "sneaky password"),
                ],
                Some(cookie),
            )
            .await;
        assert_eq!(response.status, StatusCode::FORBIDDEN);
    }
    assert_eq!(user_count(&app).await, 3);
}

#[tokio::test]
async fn an_admin_creates_a_user_who_can_then_sign_in() {
    let (app, admin, _, _) = app_with_people().await;
    let response = app
        .post_form(
            "/api/users/create",
            &[
                ("username", "grace"),
                ("role", "leadership"),
                ("password", "hopper1906"),
            ],
            Some(&admin),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    assert_eq!(response.json()["role"], "leadership");
    app.sign_in("grace", "hopper1906").await;
}

#[tokio::test]
async fn invalid_new_users_are_refused_naming_the_field_and_nothing_is_written() {
    let (app, admin, _, _) = app_with_people().await;
    let cases = [
        (("bad name", "researcher", "long enough"), 422, "username"),
        (("okname", "boss", "long enough"), 422, "role"),
        (("okname", "researcher", "short"), 422, "password"),
        (("ADA", "researcher", "long enough"), 409, "username"),
    ];
    for ((username, role, password), status, field) in cases {
        let response = app
            .post_form(
                "/api/users/create",
                &[
                    ("username", username),
                    ("role", role),
                    ("password", password),
                ],
                Some(&admin),
            )
            .await;
        assert_eq!(
            response.status.as_u16(),
            status,
            "{username}: {}",
            response.body
        );
        let error = response.json();
        let variant = error.as_object().unwrap().values().next().unwrap();
        assert_eq!(variant["field"], field, "{}", response.body);
    }
    assert_eq!(user_count(&app).await, 3);
}

#[tokio::test]
async fn a_disabled_user_loses_their_session_and_only_admins_may_disable() {
    let (app, admin, leader, researcher) = app_with_people().await;
    let ada_id: i64 = sqlx::query_scalar("select user_id from \"user\" where username = 'ada'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let id = ada_id.to_string();

    let refused = app
        .post_form(
            "/api/users/set-disabled",
            &[("user_id", &id), ("disabled", "true")],
            Some(&leader),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(app.get("/", Some(&researcher)).await.status, StatusCode::OK);

    let done = app
        .post_form(
            "/api/users/set-disabled",
            &[("user_id", &id), ("disabled", "true")],
            Some(&admin),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.json()["disabled"], true);
    assert_eq!(
        app.get("/", Some(&researcher)).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn an_admin_cannot_disable_their_own_account() {
    let (app, admin, _, _) = app_with_people().await;
    let root_id: i64 = sqlx::query_scalar("select user_id from \"user\" where username = 'root'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let response = app
        .post_form(
            "/api/users/set-disabled",
            &[("user_id", &root_id.to_string()), ("disabled", "true")],
            Some(&admin),
        )
        .await;
    assert_eq!(response.status, StatusCode::CONFLICT);
    assert_eq!(app.get("/", Some(&admin)).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_users_page_renders_for_admins_and_refuses_others() {
    let (app, admin, _, researcher) = app_with_people().await;
    let page = app.get("/users", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Create a user"), "{}", page.body);
    assert!(
        !page.body.contains("demo-banner"),
        "a real cluster is not called a demo"
    );
    let refused = app.get("/users", Some(&researcher)).await;
    assert!(
        refused
            .body
            .contains("Only administrators can manage users."),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("Create a user"));
}

#[tokio::test]
async fn an_admin_changes_a_role_which_applies_on_the_next_request_and_others_are_refused() {
    let (app, admin, leader, researcher) = app_with_people().await;
    let id = |name: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("select user_id from \"user\" where username = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
                .to_string()
        }
    };
    let (ada, root) = (id("ada").await, id("root").await);
    let role_of = |name: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("select role from \"user\" where username = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    // Not an admin: refused, whoever the target.
    for cookie in [&leader, &researcher] {
        let refused = app
            .post_form(
                "/api/users/set-role",
                &[("user_id", &ada), ("role", "admin")],
                Some(cookie),
            )
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    }
    // A role that does not exist, and the admin's own role: named, nothing changes.
    let bad = app
        .post_form(
            "/api/users/set-role",
            &[("user_id", &ada), ("role", "owner")],
            Some(&admin),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    assert!(bad.body.contains("Unknown role"), "{}", bad.body);
    let own = app
        .post_form(
            "/api/users/set-role",
            &[("user_id", &root), ("role", "researcher")],
            Some(&admin),
        )
        .await;
    assert_eq!(own.status, StatusCode::CONFLICT, "{}", own.body);
    assert_eq!(
        (role_of("ada").await, role_of("root").await),
        ("researcher".to_string(), "admin".to_string())
    );

    let done = app
        .post_form(
            "/api/users/set-role",
            &[("user_id", &ada), ("role", "leadership")],
            Some(&admin),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.json()["role"], "leadership");
    // ada's open session carries the new role: the Reports page is hers now.
    let page = app.get("/reports", Some(&researcher)).await;
    assert_eq!(
        page.status,
        StatusCode::OK,
        "{}",
        page.body
            .split("role=\"alert\"")
            .nth(1)
            .unwrap_or("")
            .chars()
            .take(300)
            .collect::<String>()
    );
    assert!(!page.body.contains("Not available to you"), "{}", page.body);
}
