//! Load bench (issue: production): a seeded server on loopback; 200 signed-in sessions read the
//! workloads list and the queue page, then cycle through every kind of page with no pause (200
//! renders in flight; every one must answer), then the JSON API takes 50 submissions a second.
//! Prints p50 / p99 latency and throughput per phase.
//!
//! `cargo bench -p server --bench load` (SQLite in a temp dir), or with
//! `HOURGLASS_BENCH_DATABASE_URL=postgres://…` against PostgreSQL. `HOURGLASS_BENCH_SECONDS`
//! sets each phase's length (default 10).

use server::{
    budget::{import::import_org, org_file::OrgFile},
    build_app,
    config::ServeArgs,
    db,
    runtime::Runtime,
    serve::{leptos_options, runtime_config},
    tokens::service as tokens,
    users::{repo, service},
    AppState,
};
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

const SESSIONS: usize = 200;
const USERS: usize = 20;
const SUBMISSIONS_PER_S: u64 = 50;
const QUEUED: usize = 2_000;
const PASSWORD: &str = "load bench password";
/// The mixed phase's name, and the pages it cycles through.
const EVERY_PAGE: &str = "every page kind";
const PAGES: [&str; 9] = [
    "/",
    "/workloads",
    "/queue",
    "/nodes",
    "/tree",
    "/approvals",
    "/reports",
    "/tokens",
    "/workloads/new",
];

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::var("HOURGLASS_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let dir = tempfile::tempdir().expect("temp dir");
    let url = std::env::var("HOURGLASS_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("load.db").display()));
    let pool = db::open(&url).await.expect("database");

    // An org of 10 projects, 20 researchers (members of all), one 8-GPU node.
    let mut org = String::from("[shares]\n\"lab\" = 1\n");
    let mut members = String::from("[members]\n");
    let names: Vec<String> = (0..USERS).map(|u| format!("r{u}")).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    for p in 0..10 {
        let _ = writeln!(org, "\"lab/p{p}\" = {}", 1 + p % 3);
        let _ = writeln!(members, "\"lab/p{p}\" = [{}]", quoted.join(", "));
    }
    for name in &names {
        service::create_user(
            &pool,
            name,
            "researcher",
            PASSWORD.into(),
            server::clock::Clock::system().now(),
        )
        .await
        .expect("user");
    }
    let org = format!("{org}\n{members}");
    import_org(&pool, &OrgFile::parse(&org).expect("org"), 0)
        .await
        .expect("import");
    sqlx::query(
        "insert into node (name, gpu_count, token_hash, registered_at) values ('n0', 8, 'bench', 0)",
    )
    .execute(&pool)
    .await
    .expect("node");

    let args = ServeArgs {
        site_root: dir.path().join("site"),
        ..ServeArgs::default()
    };
    let control_pool = db::connect_control(&url).await.expect("control pool");
    let runtime = Runtime::new(control_pool.clone(), runtime_config(&args));
    let sessions = db::SessionStore::open(&url).await.expect("session store");
    let state = AppState {
        leptos_options: leptos_options(&args).expect("options"),
        sessions,
        pool: pool.clone(),
        control_pool,
        secure_cookies: false,
        runtime,
        lab: server::lab::Lab::new(None),
        proxy: Default::default(),
        metrics_token: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, build_app(state)).await.unwrap() });

    server::agent::client::install_tls_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(SESSIONS)
        .build()
        .unwrap();
    let mut api_tokens = Vec::new();
    for name in &names {
        let user = repo::find_user_by_username(&pool, name)
            .await
            .unwrap()
            .unwrap();
        api_tokens.push(
            tokens::create_token(
                &pool,
                user.user_id,
                "load",
                server::clock::Clock::system().now(),
            )
            .await
            .unwrap(),
        );
    }

    // Seed the queue through the API.
    let seeding = Instant::now();
    for i in 0..QUEUED {
        submit(&http, &base, &api_tokens[i % USERS], i).await;
    }
    println!(
        "seeded {QUEUED} queued workloads through the API in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );

    // 200 sessions (each user signed in 10 times).
    let mut cookies = Vec::new();
    for s in 0..SESSIONS {
        let response = http
            .post(format!("{base}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "username={}&password={}",
                names[s % USERS],
                PASSWORD.replace(' ', "+")
            ))
            .send()
            .await
            .unwrap();
        let cookie =
            server::auth::session::session_cookie(response.headers()).expect("a session cookie");
        cookies.push(cookie);
    }

    println!(
        "\n{:<46} {:>9} {:>9} {:>9} {:>10}",
        "phase", "requests", "p50 ms", "p99 ms", "per second"
    );
    // Each session loads the page, reads it for 1–3 s (people do), and loads it again; the last
    // phase drops the reading time to find the most the server can serve.
    // The last phase has every session cycle through every kind of page with no pause: 200
    // renders in flight at once, each of which must answer.
    for (page, think) in [
        ("/workloads", true),
        ("/queue", true),
        ("/queue", false),
        (EVERY_PAGE, false),
    ] {
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (k, cookie) in cookies.clone().into_iter().enumerate() {
            let (http, base, latencies) = (http.clone(), base.clone(), latencies.clone());
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                let mut seed = 0x2545_f491_4f6c_dd1d_u64 ^ (k as u64 + 1);
                if think {
                    // Sessions arrive spread over the first 2 s.
                    tokio::time::sleep(Duration::from_millis(seed % 2_000)).await;
                }
                let mut turn = k;
                while Instant::now() < deadline {
                    let path = if page == EVERY_PAGE {
                        turn += 1;
                        PAGES[turn % PAGES.len()]
                    } else {
                        page
                    };
                    let t = Instant::now();
                    let response = http
                        .get(format!("{base}{path}"))
                        .header("cookie", &cookie)
                        .send()
                        .await
                        .unwrap();
                    assert!(
                        response.status().is_success(),
                        "{path}: {}",
                        response.status()
                    );
                    let _ = response.bytes().await.unwrap();
                    mine.push(t.elapsed());
                    if think {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        tokio::time::sleep(Duration::from_millis(1_000 + seed % 2_000)).await;
                    }
                }
                latencies.lock().await.extend(mine);
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed();
        let latencies = latencies.lock().await.clone();
        let how = if think { "reading 1-3 s" } else { "no pause" };
        report(
            &format!("GET {page}, {SESSIONS} sessions, {how}"),
            latencies,
            elapsed,
        );
    }

    // 50 submissions a second, open loop: one starts every 20 ms whatever the others do.
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / SUBMISSIONS_PER_S));
    let mut tasks = Vec::new();
    for i in 0..(SUBMISSIONS_PER_S * seconds) as usize {
        tick.tick().await;
        let (http, base, token, latencies) = (
            http.clone(),
            base.clone(),
            api_tokens[i % USERS].clone(),
            latencies.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            submit(&http, &base, &token, QUEUED + i).await;
            latencies.lock().await.push(t.elapsed());
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let latencies = latencies.lock().await.clone();
    report(
        &format!("POST /api/v1/workloads, {SUBMISSIONS_PER_S}/s"),
        latencies,
        elapsed,
    );
    println!(
        "\ndatabase: {}",
        if url.starts_with("postgres") {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
}

async fn submit(http: &reqwest::Client, base: &str, token: &str, i: usize) {
    let body = serde_json::json!({
        "project": format!("lab/p{}", i % 10),
        "name": format!("load-{i}"),
        "command": "true",
        "gpus": 1 + (i % 4),
        "min_runtime_s": 900,
        "resumable": true,
    });
    let response = http
        .post(format!("{base}/api/v1/workloads"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        reqwest::StatusCode::CREATED,
        "{:?}",
        response.text().await
    );
}

fn report(phase: &str, latencies: Vec<Duration>, elapsed: Duration) {
    let summary = server::loadtest::measure::Summary::of(latencies);
    println!(
        "{phase:<46} {:>9} {:>9.1} {:>9.1} {:>10.1}",
        summary.count,
        summary.p50_ms,
        summary.p99_ms,
        summary.count as f64 / elapsed.as_secs_f64()
    );
}
