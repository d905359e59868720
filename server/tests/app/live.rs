//! A live cluster for tests: the real server on a loopback port with its runtime running, an org
//! imported, and real `hourglass agent` processes running real commands.

use crate::support::{now, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server::{
    budget::{import::import_org, org_file::OrgFile},
    build_app,
    nodes::service as node_service,
    runtime::{config::RuntimeConfig, Runtime},
    tokens::service as tokens,
    AppState,
};
use std::{process::Stdio, time::Duration};
use tokio::process::{Child, Command};

pub const ORG: &str = r#"
[shares]
"ai" = 1
"ai/olmo" = 3
"ai/molmo" = 1

[owners]
"" = ["root"]
"ai" = ["pat"]

[members]
"ai/olmo" = ["ada"]
"ai/molmo" = ["bob"]
"#;

/// What Prometheus sends to read a live server's `/metrics`.
pub const METRICS_TOKEN: &str = "scrape-me-please";

pub struct Live {
    pub app: TestApp,
    pub url: String,
    pub http: reqwest::Client,
    pub agents: Vec<AgentProcess>,
    pub runtime: Runtime,
}

/// A real `hourglass agent` process with its own state directory. Dropped, it gets SIGTERM (it
/// stops its runs and exits), so tests leave no workload processes behind.
pub struct AgentProcess {
    pub child: Child,
    pub state: tempfile::TempDir,
}

impl AgentProcess {
    /// Starts `hourglass agent ARGS --state-dir <its own>` (or in `state` when given).
    pub fn spawn(args: &[&str], state: Option<tempfile::TempDir>) -> AgentProcess {
        AgentProcess::spawn_with_env(args, state, &[])
    }

    /// As [`AgentProcess::spawn`], with extra environment (e.g. a `PATH` with a fake `nvidia-smi`).
    pub fn spawn_with_env(
        args: &[&str],
        state: Option<tempfile::TempDir>,
        env: &[(&str, String)],
    ) -> AgentProcess {
        let state = state.unwrap_or_else(|| tempfile::tempdir().unwrap());
        let child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg("agent")
            .args(args)
            .arg("--state-dir")
            .arg(state.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("HOURGLASS_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the agent");
        AgentProcess { child, state }
    }

    /// SIGKILL: the agent dies at once, its runs do not (as when it crashes).
    pub async fn kill_hard(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

pub fn fast_config() -> RuntimeConfig {
    RuntimeConfig {
        heartbeat_deadline: 3,
        grace: 1,
        safety_tick_ms: 200,
        // Tests read owed time as soon as work ended.
        demand_every_s: 0,
        ..RuntimeConfig::default()
    }
}

impl Live {
    pub async fn start() -> Live {
        Live::start_with(fast_config()).await
    }

    pub async fn start_with(config: RuntimeConfig) -> Live {
        Live::start_on(config, server::clock::Clock::system()).await
    }

    /// A server whose runtime (and every service acting through it) reads `clock`.
    pub async fn start_on(config: RuntimeConfig, clock: server::clock::Clock) -> Live {
        let app = TestApp::new().await;
        for (name, role) in [
            ("root", "admin"),
            ("pat", "researcher"),
            ("ada", "researcher"),
            ("bob", "researcher"),
        ] {
            app.create_user(name, role, "long enough 1").await;
        }
        import_org(&app.pool, &OrgFile::parse(ORG).unwrap(), now())
            .await
            .unwrap();
        let runtime = Runtime::with_clock(app.pool.clone(), config, clock);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = build_app(AppState {
            leptos_options: app_state_options(&app),
            pool: app.pool.clone(),
            control_pool: app.pool.clone(),
            sessions: app.sessions.clone(),
            secure_cookies: false,
            runtime: runtime.clone(),
            lab: server::lab::Lab::new(None),
            proxy: Default::default(),
            metrics_token: Some(METRICS_TOKEN.into()),
        });
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        runtime.spawn();
        Live {
            app,
            url,
            http: client(),
            agents: Vec::new(),
            runtime,
        }
    }

    /// Registers a node and starts a real agent process for it.
    pub async fn add_agent(&mut self, name: &str, gpus: u32) -> usize {
        self.add_agent_in(name, gpus, "default").await
    }

    /// Registers a node in `cluster` and starts a real agent process for it (`--cluster`).
    pub async fn add_agent_in(&mut self, name: &str, gpus: u32, cluster: &str) -> usize {
        let (_, token) =
            node_service::register_node(&self.app.pool, name, Some(cluster), crate::support::now())
                .await
                .unwrap();
        let gpus = gpus.to_string();
        let child = AgentProcess::spawn(
            &[
                "--server",
                &self.url,
                "--name",
                name,
                "--cluster",
                cluster,
                "--gpus",
                &gpus,
                "--token",
                &token,
            ],
            None,
        );
        self.agents.push(child);
        self.wait_for_node(name, "healthy").await;
        self.agents.len() - 1
    }

    pub async fn token(&self, username: &str) -> String {
        let user = server::users::repo::find_user_by_username(&self.app.pool, username)
            .await
            .unwrap()
            .unwrap();
        tokens::create_token(&self.app.pool, user.user_id, "test", crate::support::now())
            .await
            .unwrap()
    }

    pub async fn get(&self, username: &str, path: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(self.token(username).await)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, username: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(self.token(username).await)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn submit(&self, username: &str, body: Value) -> i64 {
        let (status, workload) = self.post(username, "/api/v1/workloads", body).await;
        assert_eq!(status, StatusCode::CREATED, "{workload}");
        workload["id"].as_i64().unwrap()
    }

    pub async fn workload(&self, id: i64) -> Value {
        self.get("root", &format!("/api/v1/workloads/{id}")).await.1
    }

    /// Polls until the workload is in `state` (at most 20 s).
    pub async fn wait_for_state(&self, id: i64, state: &str) -> Value {
        for _ in 0..200 {
            let workload = self.workload(id).await;
            if workload["state"] == state {
                return workload;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut workload = self.workload(id).await;
        workload["log_tail"] = Value::from("(left out)");
        panic!("workload {id} never reached {state}: {workload}");
    }

    /// Polls until node `name` reports `state` (at most 20 s).
    pub async fn wait_for_node(&self, name: &str, state: &str) {
        for _ in 0..200 {
            let nodes = self.get("root", "/api/v1/nodes").await.1;
            if nodes["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["name"] == name && n["state"] == state)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("node {name} never became {state}");
    }
}

/// An HTTP client whose requests give up after 15 s, so a stuck server fails a test instead of
/// hanging the suite.
pub fn client() -> reqwest::Client {
    server::agent::client::install_tls_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

fn app_state_options(app: &TestApp) -> leptos::prelude::LeptosOptions {
    let args = server::config::ServeArgs {
        site_root: app.db.dir.path().join("site"),
        ..Default::default()
    };
    server::serve::leptos_options(&args).unwrap()
}

/// `GET url` with an API token, as JSON.
pub async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> Value {
    http.get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Submits `body` (see [`job`]) through the JSON API of the server at `url`: the new workload's id.
pub async fn submit_job(http: &reqwest::Client, url: &str, token: &str, body: Value) -> i64 {
    let response = http
        .post(format!("{url}/api/v1/workloads"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::CREATED);
    response.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap()
}

pub fn job(
    project: &str,
    name: &str,
    command: &str,
    gpus: u32,
    min_runtime_s: i64,
    resumable: bool,
) -> Value {
    json!({
        "project": project, "name": name, "command": command, "gpus": gpus,
        "min_runtime_s": min_runtime_s, "resumable": resumable, "priority": 0,
    })
}
