//! `TestApp`: the real router from `build_app` on a fresh database, with typed request helpers.
//! `TestDb`: that database — a SQLite file in a temporary folder, or, when
//! `HOURGLASS_TEST_POSTGRES_URL` names a PostgreSQL server, a new database there, so the same tests
//! run on both engines.

use axum::{
    body::Body,
    http::{header, Request, StatusCode},
    Router,
};
use http_body_util::BodyExt;
use server::{
    build_app,
    config::ServeArgs,
    db::{self, SessionStore},
    guard::client::ProxySettings,
    runtime::Runtime,
    serve::{leptos_options, runtime_config},
    users::service,
    AppState,
};
use sqlx::{AnyPool, Connection, Executor};
use std::sync::atomic::{AtomicUsize, Ordering};
use tempfile::TempDir;
use tower::ServiceExt;

/// The PostgreSQL server the second test pass runs on (a URL whose database the role may use to
/// create and drop others), or `None` for the SQLite pass.
pub fn postgres_url() -> Option<String> {
    std::env::var("HOURGLASS_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// One test's database, with a temporary folder beside it (for sites, files, the SQLite file).
pub struct TestDb {
    /// What to pass as `--database` / `HOURGLASS_DATABASE_URL`.
    pub url: String,
    pub dir: TempDir,
    /// On PostgreSQL: the server's URL and the database to drop when the test ends.
    postgres: Option<(String, String)>,
}

/// Epoch seconds on the system clock (the servers under test run on it too).
pub fn now() -> i64 {
    server::clock::Clock::system().now()
}

/// Server-side warnings and errors go to the test's own output, so a failing test shows what
/// the server logged (an internal error's cause never reaches the HTTP response).
fn log_to_test_output() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
            .try_init();
    });
}

impl TestDb {
    pub async fn new() -> TestDb {
        log_to_test_output();
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = tempfile::tempdir().expect("temp dir");
        let Some(server) = postgres_url() else {
            let url = format!("sqlite://{}", dir.path().join("test.db").display());
            return TestDb {
                url,
                dir,
                postgres: None,
            };
        };
        let prefix = format!("hg_test_{}_", host_tag());
        let name = format!(
            "{prefix}{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = sqlx::postgres::PgConnection::connect(&server)
            .await
            .expect("connect to HOURGLASS_TEST_POSTGRES_URL");
        // Databases that test processes of this machine left behind when they were killed (the
        // process is gone), including one that had this process's id.
        let existing: Vec<String> =
            sqlx::query_scalar("select datname from pg_database where datname like $1")
                .bind(format!("{prefix}%"))
                .fetch_all(&mut admin)
                .await
                .expect("list test databases");
        for stale in existing {
            let pid = stale[prefix.len()..].split('_').next().unwrap_or_default();
            let ours = pid == std::process::id().to_string();
            let alive = std::path::Path::new("/proc").join(pid).exists();
            if (ours && stale == name) || (!ours && !alive) {
                // Another process may be sweeping the same one; that is fine.
                let _ = admin
                    .execute(format!("drop database if exists {stale} with (force)").as_str())
                    .await;
            }
        }
        admin
            .execute(format!("create database {name}").as_str())
            .await
            .expect("create a test database");
        let _ = admin.close().await;
        TestDb {
            url: with_database(&server, &name),
            dir,
            postgres: Some((server, name)),
        }
    }
}

impl Drop for TestDb {
    /// Drops the PostgreSQL database (and ends whatever is still connected to it), on a thread of
    /// its own since `Drop` cannot await.
    fn drop(&mut self) {
        let Some((server, name)) = self.postgres.take() else {
            return;
        };
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut admin = sqlx::postgres::PgConnection::connect(&server).await.ok()?;
                admin
                    .execute(format!("drop database if exists {name} with (force)").as_str())
                    .await
                    .ok()?;
                admin.close().await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop the test database (it is dropped by the next run)");
        }
    }
}

/// This machine's name, reduced to what a database name may hold, so that test processes sweep
/// only their own machine's leftovers on a shared server.
fn host_tag() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let tag: String = host
        .trim()
        .to_ascii_lowercase()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    if tag.is_empty() {
        "local".into()
    } else {
        tag
    }
}

/// `url` (a PostgreSQL URL) naming the database `name` instead of its own.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    format!("{}/{name}{query}", &base[..authority_end])
}

pub struct TestApp {
    pub router: Router,
    pub runtime: Runtime,
    pub pool: AnyPool,
    pub sessions: SessionStore,
    /// Last, so the pools above are dropped before a PostgreSQL database is.
    pub db: TestDb,
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
        Self::on_database(TestDb::new().await, secure_cookies).await
    }

    /// A second server process on the same database, as after a restart.
    pub async fn restarted(self) -> TestApp {
        self.pool.close().await;
        Self::on_database(self.db, false).await
    }

    /// A server whose pool has one connection and waits at most 5 s for it: a request that holds
    /// a connection while asking for another fails instead of passing.
    pub async fn with_one_connection() -> TestApp {
        let test_db = TestDb::new().await;
        db::open(&test_db.url).await.expect("migrate").close().await;
        Self::on_pool(test_db, false, |url| async move {
            db::connect_sized(&url, 1, std::time::Duration::from_secs(5))
                .await
                .expect("open database")
        })
        .await
    }

    async fn on_database(test_db: TestDb, secure_cookies: bool) -> TestApp {
        Self::on_pool(test_db, secure_cookies, |url| async move {
            db::open(&url).await.expect("open database")
        })
        .await
    }

    /// A server that believes `proxy` about its clients (`--trusted-proxy`, `--public-url`).
    pub async fn behind_proxy(proxy: ProxySettings) -> TestApp {
        let mut app = Self::new().await;
        app.router = app.replica(proxy).await;
        app
    }

    /// Another replica's router on this app's database (its own pools and runtime).
    pub async fn replica(&self, proxy: ProxySettings) -> Router {
        let pool = db::open(&self.db.url).await.expect("open database");
        Self::state(&self.db, pool, false, proxy).await.0
    }

    async fn on_pool<F, Fut>(test_db: TestDb, secure_cookies: bool, open: F) -> TestApp
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = AnyPool>,
    {
        let pool = open(test_db.url.clone()).await;
        let (router, runtime, sessions) = Self::state(
            &test_db,
            pool.clone(),
            secure_cookies,
            ProxySettings::default(),
        )
        .await;
        TestApp {
            router,
            runtime,
            pool,
            sessions,
            db: test_db,
        }
    }

    async fn state(
        test_db: &TestDb,
        pool: AnyPool,
        secure_cookies: bool,
        proxy: ProxySettings,
    ) -> (Router, Runtime, SessionStore) {
        let sessions = SessionStore::open(&test_db.url)
            .await
            .expect("open the session store");
        let args = ServeArgs {
            site_root: test_db.dir.path().join("site"),
            ..ServeArgs::default()
        };
        // The agents' and the scheduler's connections: a pool of their own, as `serve` opens.
        let control_pool = db::connect_control(&test_db.url)
            .await
            .expect("open the control pool");
        let runtime = Runtime::new(control_pool.clone(), runtime_config(&args));
        let state = AppState {
            leptos_options: leptos_options(&args).expect("leptos options"),
            pool,
            control_pool,
            sessions: sessions.clone(),
            secure_cookies,
            runtime: runtime.clone(),
            lab: server::lab::Lab::new(None),
            proxy: std::sync::Arc::new(proxy),
            metrics_token: None,
        };
        (build_app(state), runtime, sessions)
    }

    pub async fn create_user(&self, username: &str, role: &str, password: &str) {
        service::create_user(
            &self.pool,
            username,
            role,
            password.to_string(),
            crate::support::now(),
        )
        .await
        .expect("create user");
    }

    /// Sends a request through the router; a response (head or body) that takes over 20 s fails
    /// the test, naming the path, instead of stalling the suite.
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let path = request.uri().to_string();
        let response = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            self.router.clone().oneshot(request),
        )
        .await
        .unwrap_or_else(|_| panic!("no response head for {path} within 20 s"))
        .expect("response");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            response.into_body().collect(),
        )
        .await
        .unwrap_or_else(|_| panic!("{path} answered {status} but its body did not end within 20 s"))
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

    /// `POST`s `body` as JSON with a bearer token (the agent's or an API token).
    pub async fn post_json(
        &self,
        path: &str,
        bearer: &str,
        body: &serde_json::Value,
    ) -> TestResponse {
        let request = Request::post(path)
            .header(header::AUTHORIZATION, format!("Bearer {bearer}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        self.send(request).await
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

/// The org of [`crate::live::ORG`] with its people (root, pat, ada, bob; password "long enough 1")
/// and node `n1` registered. Returns the node's agent token and an API token of ada's.
pub async fn seed_org(pool: &AnyPool) -> (String, String) {
    use server::{
        budget::import::import_org, budget::org_file::OrgFile, tokens::service as tokens,
    };
    for name in ["root", "pat", "ada", "bob"] {
        service::create_user(
            pool,
            name,
            "researcher",
            "long enough 1".into(),
            crate::support::now(),
        )
        .await
        .unwrap();
    }
    import_org(pool, &OrgFile::parse(crate::live::ORG).unwrap(), now())
        .await
        .unwrap();
    let (_, node_token) =
        server::nodes::service::register_node(pool, "n1", None, crate::support::now())
            .await
            .unwrap();
    let ada = server::users::repo::find_user_by_username(pool, "ada")
        .await
        .unwrap()
        .unwrap();
    let token = tokens::create_token(pool, ada.user_id, "test", crate::support::now())
        .await
        .unwrap();
    (node_token, token)
}
