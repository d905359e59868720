use crate::support::TestApp;
use axum::http::StatusCode;

#[tokio::test]
async fn anonymous_visit_to_an_app_page_is_sent_to_login_and_remembers_the_page() {
    let app = TestApp::new().await;
    let response = app.get("/users?filter=all", None).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.location(), "/login?next=%2Fusers%3Ffilter%3Dall");

    let home = app.get("/", None).await;
    assert_eq!(home.location(), "/login");
}

#[tokio::test]
async fn login_page_offers_a_labelled_username_and_password_field() {
    let app = TestApp::new().await;
    let response = app.get("/login?next=%2Fusers", None).await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(
        response
            .body
            .contains(r#"<label for="username">Username</label>"#),
        "{}",
        response.body
    );
    assert!(response
        .body
        .contains(r#"<label for="password">Password</label>"#));
    assert!(response.body.contains(r#"type="password""#));
}

#[tokio::test]
async fn sign_in_with_the_right_password_opens_a_session_and_returns_to_the_page() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let response = app
        .post_form(
            "/login",
            &[
                ("username", "Ada"),
                ("password", "correct horse"),
                ("next", "/users"),
            ],
            None,
        )
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.location(), "/users");
    let cookie = response.session_cookie().expect("session cookie");

    let home = app.get("/", Some(&cookie)).await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(home.body.contains("Welcome, ada"), "{}", home.body);
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_generic_refusal() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let wrong_password = app
        .post_form(
            "/login",
            &[("username", "ada"), ("password", "wrong horse")],
            None,
        )
        .await;
    let unknown_user = app
        .post_form(
            "/login",
            &[("username", "bob"), ("password", "correct horse")],
            None,
        )
        .await;
    for response in [&wrong_password, &unknown_user] {
        assert_eq!(response.status, StatusCode::SEE_OTHER);
        assert!(
            response.location().starts_with("/login?error=1"),
            "{}",
            response.location()
        );
        assert!(
            response.session_cookie().is_none(),
            "a refused sign-in must not open a session"
        );
    }
    let page = app.get(wrong_password.location(), None).await;
    assert!(page.body.contains(app::pages::login::SIGN_IN_FAILED));
    assert!(!page.body.to_lowercase().contains("unknown user"));
}

#[tokio::test]
async fn a_disabled_account_cannot_sign_in() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    server::users::service::set_disabled_by_username(&app.pool, "ada", true, crate::support::now())
        .await
        .unwrap();
    let response = app
        .post_form(
            "/login",
            &[("username", "ada"), ("password", "correct horse")],
            None,
        )
        .await;
    assert!(response.location().starts_with("/login?error=1"));
}

#[tokio::test]
async fn the_session_cookie_is_http_only_and_same_site_lax_and_secure_only_when_configured() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let response = app
        .post_form(
            "/login",
            &[("username", "ada"), ("password", "correct horse")],
            None,
        )
        .await;
    let cookie = response.set_cookie().expect("cookie").to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");

    let secure = TestApp::with_secure_cookies(true).await;
    secure
        .create_user("ada", "researcher", "correct horse")
        .await;
    let response = secure
        .post_form(
            "/login",
            &[("username", "ada"), ("password", "correct horse")],
            None,
        )
        .await;
    assert!(response.set_cookie().expect("cookie").contains("Secure"));
}

#[tokio::test]
async fn signing_in_again_rotates_the_session_id() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let first = app.sign_in("ada", "correct horse").await;
    let response = app
        .post_form(
            "/login",
            &[("username", "ada"), ("password", "correct horse")],
            Some(&first),
        )
        .await;
    let second = response.session_cookie().expect("a new cookie");
    assert_ne!(first, second);
    assert_eq!(
        app.get("/", Some(&first)).await.status,
        StatusCode::SEE_OTHER,
        "old id must be dead"
    );
    assert_eq!(app.get("/", Some(&second)).await.status, StatusCode::OK);
}

#[tokio::test]
async fn sign_out_ends_the_session() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let cookie = app.sign_in("ada", "correct horse").await;
    let response = app.post_form("/logout", &[], Some(&cookie)).await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    assert_eq!(response.location(), "/login?signed_out=1");
    assert_eq!(
        app.get("/", Some(&cookie)).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn sessions_survive_a_server_restart() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let cookie = app.sign_in("ada", "correct horse").await;
    let app = app.restarted().await;
    let home = app.get("/", Some(&cookie)).await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(home.body.contains("Welcome, ada"));
}

#[tokio::test]
async fn sign_in_never_redirects_to_another_site() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let response = app
        .post_form(
            "/login",
            &[
                ("username", "ada"),
                ("password", "correct horse"),
                ("next", "//evil.example/"),
            ],
            None,
        )
        .await;
    assert_eq!(response.location(), "/");
}

#[tokio::test]
async fn an_unknown_page_answers_404_with_a_page_for_signed_in_people() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "correct horse").await;
    let cookie = app.sign_in("ada", "correct horse").await;
    let response = app.get("/no-such-page", Some(&cookie)).await;
    assert_eq!(response.status, StatusCode::NOT_FOUND);
    assert!(response.body.contains("Page not found"));
}

#[tokio::test]
async fn server_functions_refuse_anonymous_callers_with_401() {
    let app = TestApp::new().await;
    let response = app.post_form("/api/users/list", &[], None).await;
    assert_eq!(response.status, StatusCode::UNAUTHORIZED);
}
