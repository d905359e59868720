//! `TestApp`: the real router from `build_app` on a fresh SQLite file, with typed request helpers.

use axum::{
    body::Body,
    http::{header, Request, StatusCode},
    Router,
};
use http_body_util::BodyExt;
use server::{
    build_app,
    config::ServeArgs,
    db,
    runtime::Runtime,
    serve::{leptos_options, runtime_config},
    users::service,
    AppState,
};
use sqlx::SqlitePool;
use tempfile::TempDir;
use tower::ServiceExt;

pub struct TestApp {
    pub router: Router,
    pub runtime: Runtime,
    pub pool: SqlitePool,
    pub database: String,
    pub dir: TempDir,
}

pub struct TestResponse {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

impl TestResponse {
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// `hourglass_session=…` from the Set-Cookie header, if one was set.
    pub fn session_cookie(&self) -> Option<String> {
        self.set_cookie()
            .map(|c| c.split(';').next().unwrap_or_default().to_string())
    }

    pub fn set_cookie(&self) -> Option<&str> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("hourglass_session="))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

impl TestApp {
    pub async fn new() -> TestApp {
        Self::with_secure_cookies(false).await
    }

    pub async fn with_secure_cookies(secure_cookies: bool) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let database = format!("sqlite://{}", dir.path().join("test.db").display());
        Self::on_database(dir, database, secure_cookies).await
    }

    /// A second server process on the same database file, as after a restart.
    pub async fn restarted(self) -> TestApp {
        self.pool.close().await;
        Self::on_database(self.dir, self.database, false).await
    }

    async fn on_database(dir: TempDir, database: String, secure_cookies: bool) -> TestApp {
        let pool = db::open(&database).await.expect("open database");
        let args = ServeArgs {
            site_root: dir.path().join("site"),
            ..ServeArgs::default()
        };
        let runtime = Runtime::new(pool.clone(), runtime_config(&args));
        let state = AppState {
            leptos_options: leptos_options(&args).expect("leptos options"),
            pool: pool.clone(),
            secure_cookies,
            runtime: runtime.clone(),
            lab: server::lab::Lab::new(None),
        };
        TestApp {
            router: build_app(state),
            runtime,
            pool,
            database,
            dir,
        }
    }

    pub async fn create_user(&self, username: &str, role: &str, password: &str) {
        service::create_user(&self.pool, username, role, password.to_string())
            .await
            .expect("create user");
    }

    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("response");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        TestResponse {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn get(&self, path: &str, cookie: Option<&str>) -> TestResponse {
        let mut request = Request::get(path).header(header::ACCEPT, "text/html");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    pub async fn post_form(
        &self,
        path: &str,
        form: &[(&str, &str)],
        cookie: Option<&str>,
    ) -> TestResponse {
        let mut request = Request::post(path)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        let body = serde_urlencoded::to_string(form).unwrap();
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// Signs in through `POST /login` and returns the session cookie.
    pub async fn sign_in(&self, username: &str, password: &str) -> String {
        let response = self
            .post_form(
                "/login",
                &[("username", username), ("password", password)],
                None,
            )
            .await;
        assert_eq!(
            response.status,
            StatusCode::SEE_OTHER,
            "sign-in of {username} failed"
        );
        assert_eq!(
            response.location(),
            "/",
            "sign-in of {username} was refused"
        );
        response.session_cookie().expect("a session cookie")
    }
}

/// A site root with empty pkg files, so `hourglass serve` (which checks for a built site) starts
/// in tests that exercise only its API.
pub fn fake_site(dir: &std::path::Path) -> std::path::PathBuf {
    let site = dir.join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    for file in ["hourglass.js", "hourglass.wasm", "hourglass.css"] {
        std::fs::write(site.join("pkg").join(file), "").unwrap();
    }
    site
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
