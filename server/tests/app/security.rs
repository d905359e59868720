//! Hostile input: cross-site writes, sign-in guessing, security headers, and an authorization
//! matrix of every mutation against every role.

use crate::{live::ORG, support::TestApp};
use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use server::budget::{import::import_org, org_file::OrgFile};

const PASSWORD: &str = "long enough 1";

/// root (admin, owns the tree), lee (leadership), ada (researcher in ai/olmo), bob (ai/molmo).
async fn org() -> TestApp {
    let app = TestApp::new().await;
    for (name, role) in [
        ("root", "admin"),
        ("pat", "researcher"),
        ("ada", "researcher"),
        ("bob", "researcher"),
        ("lee", "leadership"),
    ] {
        app.create_user(name, role, PASSWORD).await;
    }
    import_org(&app.pool, &OrgFile::parse(ORG).unwrap(), 0)
        .await
        .unwrap();
    app
}

async fn post_with(
    app: &TestApp,
    path: &str,
    form: &[(&str, &str)],
    cookie: &str,
    headers: &[(&str, &str)],
) -> crate::support::TestResponse {
    let mut request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json")
        .header(header::COOKIE, cookie);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = serde_urlencoded::to_string(form).unwrap();
    app.send(request.body(Body::from(body)).unwrap()).await
}

#[tokio::test]
async fn a_cross_site_write_with_the_session_cookie_is_refused_and_changes_nothing() {
    let app = org().await;
    let admin = app.sign_in("root", PASSWORD).await;
    let form = [
        ("username", "mallory"),
        ("role", "admin"),
        ("password", "long enough 1"),
    ];
    for headers in [
        vec![("host", "gpu.lab"), ("origin", "https://evil.example")],
        vec![("host", "gpu.lab"), ("origin", "null")],
        vec![
            ("host", "gpu.lab"),
            ("referer", "https://evil.example/page"),
        ],
        vec![("host", "gpu.lab"), ("sec-fetch-site", "cross-site")],
        // A bearer header beside the cookie does not make it a script's request.
        vec![
            ("host", "gpu.lab"),
            ("origin", "https://evil.example"),
            ("authorization", "Bearer anything"),
        ],
    ] {
        let refused = post_with(&app, "/api/users/create", &form, &admin, &headers).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{headers:?}");
    }
    let users: i64 = sqlx::query_scalar("select count(*) from \"user\" where username = 'mallory'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(users, 0, "no refused request created the user");
    let same_site = post_with(
        &app,
        "/api/users/create",
        &form,
        &admin,
        &[
            ("host", "gpu.lab"),
            ("origin", "http://gpu.lab"),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(same_site.status, StatusCode::OK, "{}", same_site.body);
}

#[tokio::test]
async fn five_failed_sign_ins_lock_the_account_even_against_the_right_password() {
    let app = org().await;
    for _ in 0..5 {
        let failed = app
            .post_form(
                "/login",
                &[("username", "ada"), ("password", "guess")],
                None,
            )
            .await;
        assert!(
            failed.location().starts_with("/login?error=1"),
            "{}",
            failed.location()
        );
    }
    let locked = app
        .post_form(
            "/login",
            &[("username", "ADA"), ("password", PASSWORD)],
            None,
        )
        .await;
    assert!(
        locked
            .location()
            .starts_with("/login?error=throttled&minutes=15"),
        "{}",
        locked.location()
    );
    assert!(
        locked.session_cookie().is_none(),
        "no session for a throttled sign-in"
    );
    let page = app.get(locked.location(), None).await;
    assert!(
        page.body.contains("Too many failed sign-ins"),
        "the page explains it"
    );
    // Another account is not affected.
    app.sign_in("bob", PASSWORD).await;
}

#[tokio::test]
async fn pages_carry_a_nonce_content_security_policy_and_security_headers() {
    let app = org().await;
    let page = app.get("/login", None).await;
    let csp = page.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_string();
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce in the policy");
    assert!(nonce.len() >= 16, "{csp}");
    assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert!(
        page.body.contains(&format!("nonce=\"{nonce}\"")),
        "the hydration script carries the nonce"
    );
    let again = app.get("/login", None).await;
    assert_ne!(
        again.headers[header::CONTENT_SECURITY_POLICY],
        page.headers[header::CONTENT_SECURITY_POLICY],
        "a fresh nonce per response"
    );
    for response in [&page, &app.get("/healthz", None).await] {
        assert_eq!(response.headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(response.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(response
            .headers
            .contains_key(header::CONTENT_SECURITY_POLICY));
    }
}

/// A mutation's endpoint, its form, and the status expected for anonymous, ada, lee and root.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, [u16; 4]);

/// Every mutation's server function against every role: the status each gets. 401: not signed
/// in; 403: signed in without the right; anything else got past authorization (and may then be
/// refused as invalid input or a missing record).
#[tokio::test]
async fn every_mutation_is_authorized_on_the_server_for_every_role() {
    let app = org().await;
    let bob_id: i64 = sqlx::query_scalar("select user_id from \"user\" where username = 'bob'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let bob_id = bob_id.to_string();
    sqlx::query("insert into node (name, gpu_count, token_hash, registered_at) values ('h-0', 8, 'hash', 0)")
        .execute(&app.pool)
        .await
        .unwrap();
    let mut cookies = vec![("anonymous", String::new())];
    for name in ["ada", "lee", "root"] {
        cookies.push((name, app.sign_in(name, PASSWORD).await));
    }
    let settings = [
        ("window_days", "3"),
        ("max_min_runtime_hours", "4"),
        ("damping_margin", "0.05"),
        ("heartbeat_deadline_s", "45"),
        ("grace_s", "20"),
    ];
    let submit = [
        ("project", "ai/olmo"),
        ("name", "probe"),
        ("command", "true"),
        ("gpus", "1"),
        ("min_runtime", "0"),
        ("priority", "0"),
    ];
    // (endpoint, form, expected status for anonymous, ada, lee, root)
    let matrix: Vec<Case> = vec![
        (
            "/api/users/create",
            vec![("role", "researcher"), ("password", PASSWORD)],
            [401, 403, 403, 200],
        ),
        (
            "/api/users/set-disabled",
            vec![("user_id", bob_id.as_str()), ("disabled", "false")],
            [401, 403, 403, 200],
        ),
        (
            "/api/users/set-role",
            vec![("user_id", bob_id.as_str()), ("role", "researcher")],
            [401, 403, 403, 200],
        ),
        ("/api/settings/webhook/test", vec![], [401, 403, 403, 422]),
        // Only an owner of the node or above (root owns the root) adds a member.
        (
            "/api/budget/people/change",
            vec![
                ("kind", "member"),
                ("path", "ai/olmo"),
                ("username", "bob"),
                ("add", "true"),
            ],
            [401, 403, 403, 200],
        ),
        (
            "/api/settings/update",
            settings.to_vec(),
            [401, 403, 403, 200],
        ),
        ("/api/nodes/register", vec![], [401, 403, 403, 200]),
        (
            "/api/nodes/action",
            vec![("name", "no-such-node"), ("action", "cordon")],
            [401, 403, 403, 404],
        ),
        (
            "/api/nodes/remove",
            vec![("name", "no-such-node")],
            [401, 403, 403, 404],
        ),
        (
            "/api/lab/start",
            vec![("form[source]", "reference"), ("form[days]", "0")],
            [401, 403, 422, 422],
        ),
        (
            "/api/tokens/create",
            vec![("name", "probe")],
            [401, 200, 200, 200],
        ),
        (
            "/api/tokens/revoke",
            vec![("id", "9999")],
            [401, 404, 404, 404],
        ),
        (
            "/api/workloads/submit",
            submit.to_vec(),
            [401, 200, 422, 422],
        ),
        (
            "/api/workloads/cancel",
            vec![("id", "9999")],
            [401, 404, 404, 404],
        ),
        (
            "/api/budget/decide",
            vec![("id", "9999"), ("approve", "true"), ("comment", "")],
            [401, 404, 404, 404],
        ),
        (
            "/api/budget/withdraw",
            vec![("id", "9999")],
            [401, 404, 404, 404],
        ),
        (
            "/api/budget/rebase",
            vec![("id", "9999")],
            [401, 404, 404, 404],
        ),
    ];
    let mut wrong = Vec::new();
    for (path, form, expected) in &matrix {
        for (k, (who, cookie)) in cookies.iter().enumerate() {
            let mut form = form.clone();
            let unique = format!("probe-{who}");
            if *path == "/api/users/create" || *path == "/api/nodes/register" {
                let key = if *path == "/api/users/create" {
                    "username"
                } else {
                    "name"
                };
                form.push((key, unique.as_str()));
            }
            let response = if cookie.is_empty() {
                app.post_form(path, &form, None).await
            } else {
                app.post_form(path, &form, Some(cookie)).await
            };
            if response.status.as_u16() != expected[k] {
                wrong.push(format!(
                    "{path} as {who}: {} (expected {}): {}",
                    response.status, expected[k], response.body
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The JSON API's mutations against every role, with bearer tokens: 401 without one, 403 for a
/// role without the right; anything else got past authorization.
#[tokio::test]
async fn every_json_api_mutation_is_authorized_for_every_role() {
    let app = org().await;
    sqlx::query("insert into node (name, gpu_count, token_hash, registered_at) values ('h-0', 8, 'hash', 0)")
        .execute(&app.pool)
        .await
        .unwrap();
    let mut bearer = vec![("anonymous", String::new())];
    for name in ["ada", "lee", "root"] {
        let user = server::users::repo::find_user_by_username(&app.pool, name)
            .await
            .unwrap()
            .unwrap();
        let token = server::tokens::service::create_token(
            &app.pool,
            user.user_id,
            "matrix",
            crate::support::now(),
        )
        .await
        .unwrap();
        bearer.push((name, token));
    }
    let submit = serde_json::json!({
        "project": "ai/olmo", "name": "probe", "command": "true", "gpus": 1, "min_runtime_s": 0,
    });
    let propose = serde_json::json!({
        "node": "ai", "shares": {"ai/olmo": 2, "ai/molmo": 1}, "justification": "the matrix asks",
    });
    let empty = serde_json::json!({ "comment": "" });
    // (path, body, expected status for anonymous, ada, lee, root)
    let matrix: Vec<(&str, &serde_json::Value, [u16; 4])> = vec![
        ("/api/v1/workloads", &submit, [401, 201, 422, 422]),
        (
            "/api/v1/workloads/9999/cancel",
            &empty,
            [401, 404, 404, 404],
        ),
        ("/api/v1/change-requests", &propose, [401, 201, 403, 201]),
        (
            "/api/v1/change-requests/9999/approve",
            &empty,
            [401, 404, 404, 404],
        ),
        (
            "/api/v1/change-requests/9999/reject",
            &empty,
            [401, 404, 404, 404],
        ),
        (
            "/api/v1/change-requests/9999/withdraw",
            &empty,
            [401, 404, 404, 404],
        ),
        (
            "/api/v1/change-requests/9999/rebase",
            &empty,
            [401, 404, 404, 404],
        ),
        ("/api/v1/nodes/h-0/cordon", &empty, [401, 403, 403, 200]),
    ];
    let mut wrong = Vec::new();
    for (path, body, expected) in &matrix {
        for (k, (who, token)) in bearer.iter().enumerate() {
            let mut request = Request::post(*path).header(header::CONTENT_TYPE, "application/json");
            if !token.is_empty() {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            let response = app
                .send(request.body(Body::from(body.to_string())).unwrap())
                .await;
            if response.status.as_u16() != expected[k] {
                wrong.push(format!(
                    "{path} as {who}: {} (expected {}): {}",
                    response.status, expected[k], response.body
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn an_oversized_body_is_refused_with_its_limit_and_changes_nothing() {
    let app = org().await;
    let huge = "x".repeat(2 << 20);
    // Declared length over the limit: refused before anything reads it.
    let response = app
        .post_form("/login", &[("username", "ada"), ("password", &huge)], None)
        .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        response.json()["error"]
            .as_str()
            .unwrap()
            .contains("may be at most 1 MiB"),
        "{}",
        response.body
    );
    // A body without a declared length is cut off at the limit as it is read.
    let token = {
        let user = server::users::repo::find_user_by_username(&app.pool, "ada")
            .await
            .unwrap()
            .unwrap();
        server::tokens::service::create_token(&app.pool, user.user_id, "t", crate::support::now())
            .await
            .unwrap()
    };
    let body = format!(
        r#"{{"project":"ai/olmo","name":"{huge}","command":"true","gpus":1,"min_runtime_s":0,"resumable":true,"priority":0}}"#
    );
    let stream = futures::stream::iter(
        body.into_bytes()
            .chunks(64 << 10)
            .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>(),
    );
    let response = app
        .send(
            Request::post("/api/v1/workloads")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::from_stream(stream))
                .unwrap(),
        )
        .await;
    assert_eq!(
        response.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        response.body
    );
    let workloads: i64 = sqlx::query_scalar("select count(*) from workload")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(workloads, 0);
}

/// `POST /login` through `router` as a connection from `peer` carrying `forwarded`.
async fn sign_in_from(
    router: &axum::Router,
    peer: &str,
    forwarded: Option<&str>,
    username: &str,
    password: &str,
) -> String {
    use tower::ServiceExt;
    let mut request = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .extension(axum::extract::ConnectInfo(
            format!("{peer}:40000")
                .parse::<std::net::SocketAddr>()
                .unwrap(),
        ));
    if let Some(forwarded) = forwarded {
        request = request.header("x-forwarded-for", forwarded);
    }
    let body =
        serde_urlencoded::to_string([("username", username), ("password", password)]).unwrap();
    let response = router
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn behind_a_trusted_proxy_sign_in_throttling_counts_each_client_not_the_proxy() {
    let proxy = server::guard::client::ProxySettings::parse(&["10.0.0.0/8".into()], None).unwrap();
    let app = TestApp::behind_proxy(proxy).await;
    app.create_user("ada", "researcher", PASSWORD).await;
    // One client behind the proxy guesses at twenty made-up accounts.
    for k in 0..20 {
        let refused = sign_in_from(
            &app.router,
            "10.0.0.1",
            Some("203.0.113.5"),
            &format!("user{k}"),
            "guess",
        )
        .await;
        assert!(refused.starts_with("/login?error=1"), "{refused}");
    }
    let throttled = sign_in_from(
        &app.router,
        "10.0.0.1",
        Some("203.0.113.5"),
        "ada",
        PASSWORD,
    )
    .await;
    assert!(
        throttled.starts_with("/login?error=throttled"),
        "{throttled}"
    );
    // Everyone else behind the same proxy still signs in.
    let other = sign_in_from(
        &app.router,
        "10.0.0.1",
        Some("203.0.113.9"),
        "ada",
        PASSWORD,
    )
    .await;
    assert_eq!(other, "/");
    // A client that is not a trusted proxy cannot pass for another address.
    for k in 0..20 {
        sign_in_from(
            &app.router,
            "198.51.100.1",
            Some("203.0.113.77"),
            &format!("x{k}"),
            "guess",
        )
        .await;
    }
    let spoofed = sign_in_from(
        &app.router,
        "198.51.100.1",
        Some("203.0.113.78"),
        "ada",
        PASSWORD,
    )
    .await;
    assert!(spoofed.starts_with("/login?error=throttled"), "{spoofed}");
}

#[tokio::test]
async fn failed_sign_ins_on_two_replicas_add_up() {
    let app = org().await;
    let other = app.replica(Default::default()).await;
    for k in 0..5 {
        let router = if k % 2 == 0 { &app.router } else { &other };
        let refused = sign_in_from(router, "192.0.2.1", None, "ada", "guess").await;
        assert!(refused.starts_with("/login?error=1"), "{refused}");
    }
    for router in [&app.router, &other] {
        let locked = sign_in_from(router, "192.0.2.2", None, "ada", PASSWORD).await;
        assert!(
            locked.starts_with("/login?error=throttled"),
            "locked on every replica: {locked}"
        );
    }
}

#[tokio::test]
async fn a_token_is_listed_and_revoked_by_its_owner_alone() {
    let live = crate::live::Live::start().await;
    let bob_token = live.token("bob").await;
    let (bob_id,): (i64,) = sqlx::query_as(
        "select api_token_id from api_token t join \"user\" u on u.user_id = t.user_id
         where u.username = 'bob'",
    )
    .fetch_one(&live.app.pool)
    .await
    .unwrap();
    let ada = live.app.sign_in("ada", "long enough 1").await;
    // ada neither sees bob's token nor can revoke it.
    let listed = live
        .app
        .post_form("/api/tokens/list", &[], Some(&ada))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json(), serde_json::json!([]), "{}", listed.body);
    let id = bob_id.to_string();
    let refused = live
        .app
        .post_form("/api/tokens/revoke", &[("id", id.as_str())], Some(&ada))
        .await;
    assert_eq!(refused.status, 404, "{}", refused.body);
    let still = live
        .http
        .get(format!("{}/api/v1/workloads", live.url))
        .bearer_auth(&bob_token)
        .send()
        .await
        .unwrap();
    assert_eq!(still.status(), 200, "bob's token still works");
    // bob may.
    let bob = live.app.sign_in("bob", "long enough 1").await;
    let revoked = live
        .app
        .post_form("/api/tokens/revoke", &[("id", id.as_str())], Some(&bob))
        .await;
    assert!(revoked.status.is_success(), "{}", revoked.body);
    let gone = live
        .http
        .get(format!("{}/api/v1/workloads", live.url))
        .bearer_auth(&bob_token)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 401);
}

#[tokio::test]
async fn signed_out_callers_get_401_from_every_download_stream_and_json_read() {
    let app = org().await;
    for path in [
        "/api/v1/workloads",
        "/api/v1/workloads/1",
        "/api/v1/workloads/1/log",
        "/api/v1/clusters",
        "/api/v1/nodes",
        "/api/v1/tree",
        "/api/v1/tree/people?path=ai",
        "/api/v1/tree/shares?path=ai",
        "/api/v1/change-requests",
        "/api/v1/reports/quarter",
        "/api/v1/reports/quarter.csv",
        "/api/v1/reports/review?from=2026-10-01&to=2027-01-01",
        "/api/v1/reports/review.csv?from=2026-10-01&to=2027-01-01",
        "/api/v1/reports/trend",
        "/api/v1/reports/trend.csv",
        "/api/v1/reports/people?path=ai",
        "/api/v1/reports/usage.csv",
        "/api/v1/stream",
    ] {
        let response = app.get(path, None).await;
        assert_eq!(
            response.status,
            StatusCode::UNAUTHORIZED,
            "{path}: {}",
            response.body
        );
        assert!(
            !response.body.contains("ai/olmo"),
            "{path}: {}",
            response.body
        );
    }
}
