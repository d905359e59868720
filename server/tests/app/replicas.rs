//! Two `hourglass serve` replicas on one database: one holds the scheduler lease; killing it hands
//! the lease to the other within 10 s, and no decision is applied twice.

use crate::live::job;
use crate::restart::{healthy, serve, serve_with, state_of, wait_for};
use crate::support::{fake_site, free_port, seed_org, TestDb};
use server::db;
use std::time::{Duration, Instant};

async fn scheduler(http: &reqwest::Client, url: &str) -> String {
    match http.get(format!("{url}/healthz")).send().await {
        Ok(r) => r.json::<serde_json::Value>().await.unwrap()["scheduler"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        Err(_) => String::new(),
    }
}

async fn becomes(http: &reqwest::Client, url: &str, role: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while start.elapsed() < within {
        if scheduler(http, url).await == role {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} did not become {role} within {within:?}");
}

struct Setup {
    _test_db: TestDb,
    database: String,
    site: std::path::PathBuf,
    pool: sqlx::AnyPool,
    node_token: String,
    token: String,
    http: reqwest::Client,
}

async fn setup() -> Setup {
    let test_db = TestDb::new().await;
    let database = test_db.url.clone();
    let site = fake_site(test_db.dir.path());
    let pool = db::open(&database).await.unwrap();
    let (node_token, token) = seed_org(&pool).await;
    let http = crate::live::client();

    Setup {
        _test_db: test_db,
        database,
        site,
        pool,
        node_token,
        token,
        http,
    }
}

/// Starts agent `n1` (2 GPUs) against `url` and waits until the server sees it healthy.
pub(crate) async fn agent_on(
    url: &str,
    node_token: &str,
    http: &reqwest::Client,
    token: &str,
) -> crate::live::AgentProcess {
    let agent = crate::live::AgentProcess::spawn(
        &[
            "--server", url, "--name", "n1", "--gpus", "2", "--token", node_token,
        ],
        None,
    );
    for _ in 0..100 {
        let nodes = crate::live::get_json(http, &format!("{url}/api/v1/nodes"), token).await;
        if nodes["nodes"][0]["state"] == "healthy" {
            return agent;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("node n1 never became healthy on {url}");
}

async fn submit(http: &reqwest::Client, url: &str, token: &str, name: &str, command: &str) -> i64 {
    let body = job("ai/olmo", name, command, 1, 900, true);
    crate::live::submit_job(http, url, token, body).await
}

/// Each workload has exactly one run and one `started` event.
async fn started_once(pool: &sqlx::AnyPool, ids: &[i64]) {
    for id in ids {
        let runs: i64 =
            sqlx::query_scalar("select count(*) from workload_run where workload_id = $1")
                .bind(id)
                .fetch_one(pool)
                .await
                .unwrap();
        let starts: i64 = sqlx::query_scalar(
            "select count(*) from workload_event where workload_id = $1 and kind = 'started'",
        )
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!((runs, starts), (1, 1), "workload {id} started exactly once");
    }
}

/// Replica A (the leader, with `env_a`) and replica B on the setup's database, both answering.
async fn replicas(
    s: &Setup,
    env_a: &[(&str, &str)],
) -> (tokio::process::Child, tokio::process::Child, String, String) {
    let (port_a, port_b) = (free_port(), free_port());
    let (url_a, url_b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let a = serve_with(&s.database, &s.site, port_a, env_a);
    healthy(&s.http, &url_a).await;
    becomes(&s.http, &url_a, "leader", Duration::from_secs(5)).await;
    let b = serve(&s.database, &s.site, port_b);
    healthy(&s.http, &url_b).await;
    (a, b, url_a, url_b)
}

#[tokio::test]
async fn killing_the_leader_hands_the_lease_to_the_other_replica_within_ten_seconds() {
    let setup = setup().await;
    let (mut a, _b, _url_a, url_b) = replicas(&setup, &[]).await;
    let Setup {
        pool,
        node_token,
        token,
        http,
        ..
    } = &setup;
    for _ in 0..3 {
        assert_eq!(scheduler(http, &url_b).await, "follower");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The agent and the researcher talk only to the follower.
    let _agent = agent_on(&url_b, node_token, http, token).await;
    let first = submit(http, &url_b, token, "long", "sleep 60").await;
    wait_for(http, &url_b, token, first, "running").await;

    a.start_kill().unwrap();
    a.wait().await.unwrap();
    let handover = becomes(http, &url_b, "leader", Duration::from_secs(10)).await;
    eprintln!("lease handed over {handover:?} after the leader was killed");

    let second = submit(http, &url_b, token, "short", "true").await;
    wait_for(http, &url_b, token, second, "succeeded").await;
    assert_eq!(
        state_of(http, &url_b, token, first).await["state"],
        "running"
    );
    started_once(pool, &[first, second]).await;
    let (epoch, holder): (i64, String) =
        sqlx::query_as("select epoch, holder from scheduler_lease where name = 'scheduler'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(epoch, 2, "two holders so far: {holder}");
}

#[tokio::test]
async fn a_leader_killed_mid_decision_commits_nothing_and_the_next_leader_decides_once() {
    let setup = setup().await;
    // A pauses 4 s inside every pass that starts or stops work, before committing.
    let pause = [("HOURGLASS_FAULT_PAUSE_BEFORE_COMMIT_MS", "4000")];
    let (mut a, _b, _url_a, url_b) = replicas(&setup, &pause).await;
    let Setup {
        pool,
        node_token,
        token,
        http,
        ..
    } = &setup;
    let _agent = agent_on(&url_b, node_token, http, token).await;

    let id = submit(http, &url_b, token, "decided-once", "sleep 2").await;
    // A takes the wake-up within a quarter second and sits in its decision, uncommitted.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Read the database directly: through the API, the token bookkeeping would wait for A's lock.
    let state: String = sqlx::query_scalar("select state from workload where workload_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(state, "queued", "A has decided but not committed");
    a.start_kill().unwrap();
    a.wait().await.unwrap();

    becomes(http, &url_b, "leader", Duration::from_secs(10)).await;
    wait_for(http, &url_b, token, id, "succeeded").await;
    started_once(pool, &[id]).await;
}

/// Signs `username` in on `url` and returns the session cookie.
async fn session_on(url: &str, username: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = http
        .post(format!("{url}/login"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(
            serde_urlencoded::to_string([("username", username), ("password", "long enough 1")])
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("hourglass_session="))
        .and_then(|v| v.split(';').next())
        .expect("signed in")
        .to_string()
}

async fn grace_on(http: &reqwest::Client, url: &str, cookie: &str) -> i64 {
    let view: serde_json::Value = http
        .post(format!("{url}/api/settings/get"))
        .header(reqwest::header::COOKIE, cookie)
        .header(reqwest::header::ORIGIN, url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    view["grace_s"].as_i64().unwrap()
}

#[tokio::test]
async fn a_setting_changed_on_the_follower_is_applied_by_the_leader_within_two_seconds() {
    let setup = setup().await;
    server::users::service::create_user(
        &setup.pool,
        "boss",
        "admin",
        "long enough 1".into(),
        crate::support::now(),
    )
    .await
    .unwrap();
    let (_a, _b, url_a, url_b) = replicas(&setup, &[]).await;
    let http = &setup.http;
    let cookie = session_on(&url_b, "boss").await;
    assert_eq!(scheduler(http, &url_b).await, "follower");
    assert_ne!(grace_on(http, &url_a, &cookie).await, 25);

    let response = http
        .post(format!("{url_b}/api/settings/update"))
        .header(reqwest::header::COOKIE, &cookie)
        .header(reqwest::header::ORIGIN, &url_b)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(
            serde_urlencoded::to_string([
                ("window_days", "7"),
                ("max_min_runtime_hours", "8"),
                ("damping_margin", "0.02"),
                ("heartbeat_deadline_s", "30"),
                ("grace_s", "25"),
            ])
            .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap()
    );
    let changed = Instant::now();
    while grace_on(http, &url_a, &cookie).await != 25 {
        assert!(
            changed.elapsed() < Duration::from_secs(2),
            "the leader still uses the old grace period"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "a setting changed on the follower reached the leader in {} ms",
        changed.elapsed().as_millis()
    );
}
