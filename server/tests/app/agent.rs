//! The node agent under faults, with real processes: an agent killed with SIGKILL and restarted
//! (every workload runs exactly once), a job that ignores SIGTERM (killed after the grace period,
//! and only then are its GPUs reused), a job printing 5 MB (the node stays healthy, the output
//! arrives), a fake `nvidia-smi` reporting an Xid error (the node drains by itself), and sync
//! bodies over the limit (refused clearly, the heartbeat still recorded).

use crate::live::{fast_config, job, AgentProcess, Live};
use serde_json::{json, Value};
use server::nodes::service as node_service;
use std::{
    path::Path,
    time::{Duration, Instant},
};

fn agent_args<'a>(url: &'a str, name: &'a str, gpus: &'a str, token: &'a str) -> [&'a str; 8] {
    [
        "--server", url, "--name", name, "--gpus", gpus, "--token", token,
    ]
}

async fn runs_of(live: &Live, id: i64) -> i64 {
    sqlx::query_scalar("select count(*) from workload_run where workload_id = $1")
        .bind(id)
        .fetch_one(&live.app.pool)
        .await
        .unwrap()
}

async fn log_of(live: &Live, id: i64) -> String {
    let response = live
        .http
        .get(format!("{}/api/v1/workloads/{id}/log", live.url))
        .bearer_auth(live.token("root").await)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(
        status.is_success(),
        "the log of workload {id}: {status} {text}"
    );
    text
}

/// The process has exited (a zombie nobody reaped yet counts as gone: it runs nothing).
fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| server::agent::process::parse_stat(&stat))
        .is_none_or(|stat| stat.state == 'Z')
}

/// The pid a job wrote to `path`, once it has (the agent starts runs on its next sync).
async fn wait_for_pid(path: &Path) -> i32 {
    for _ in 0..300 {
        if let Ok(pid) = read(path).trim().parse() {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the job never wrote its pid to {}", path.display());
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn an_agent_killed_mid_run_and_restarted_re_adopts_its_runs_and_each_workload_runs_once() {
    let live = Live::start().await;
    let (_, token) = node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let args = agent_args(&live.url, "n1", "2", &token);
    let mut agent = AgentProcess::spawn(&args, None);
    live.wait_for_node("n1", "healthy").await;
    let marks = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for i in 0..2 {
        let mark = marks.path().join(format!("started-{i}"));
        let command = format!(
            "echo started >> {}; echo hello-{i}; sleep 3; echo done-{i}",
            mark.display()
        );
        ids.push(
            live.submit(
                "ada",
                job("ai/olmo", &format!("once-{i}"), &command, 1, 900, false),
            )
            .await,
        );
    }
    for &id in &ids {
        live.wait_for_state(id, "running").await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;

    // The agent dies mid-run; its runs do not. A new agent on the same state directory.
    agent.kill_hard().await;
    let state = std::mem::replace(&mut agent.state, tempfile::tempdir().unwrap());
    drop(agent);
    let _agent = AgentProcess::spawn(&args, Some(state));

    for (i, &id) in ids.iter().enumerate() {
        let done = live.wait_for_state(id, "succeeded").await;
        assert_eq!(done["exit_code"], 0, "{}", done["events"]);
        assert_eq!(
            runs_of(&live, id).await,
            1,
            "one run, re-adopted: {}",
            done["events"]
        );
        assert_eq!(
            read(&marks.path().join(format!("started-{i}"))),
            "started\n",
            "the command ran exactly once"
        );
        let log = log_of(&live, id).await;
        assert!(
            log.contains(&format!("hello-{i}")) && log.contains(&format!("done-{i}")),
            "output from before and after the restart reached the workload: {log:?}"
        );
    }
}

#[tokio::test]
async fn a_job_ignoring_sigterm_is_killed_after_the_grace_period_and_only_then_do_its_gpus_go_to_the_next_run(
) {
    let config = server::runtime::config::RuntimeConfig {
        grace: 2,
        ..fast_config()
    };
    let mut live = Live::start_with(config).await;
    live.add_agent("n1", 1).await;
    let files = tempfile::tempdir().unwrap();
    let (pid, alive, started) = (
        files.path().join("a.pid"),
        files.path().join("a.alive"),
        files.path().join("b.start"),
    );
    let stubborn = format!(
        "trap '' TERM; echo $$ > {}; while true; do date +%s%N >> {}; sleep 0.05; done",
        pid.display(),
        alive.display()
    );
    let a = live
        .submit("bob", job("ai/molmo", "stubborn", &stubborn, 1, 0, false))
        .await;
    live.wait_for_state(a, "running").await;
    wait_for_pid(&pid).await;

    // Funded work takes the GPU from the free job, which ignores SIGTERM.
    let b = live
        .submit(
            "ada",
            job(
                "ai/olmo",
                "next",
                &format!("date +%s%N > {}", started.display()),
                1,
                60,
                false,
            ),
        )
        .await;
    let preempted = live.wait_for_state(a, "preempted").await;
    live.wait_for_state(b, "succeeded").await;

    let stopped_at = preempted["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "preempted")
        .unwrap()["at"]
        .as_i64()
        .unwrap();
    let last_alive: i64 = read(&alive)
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .max()
        .unwrap()
        / 1_000_000;
    let b_started: i64 = read(&started).trim().parse::<i64>().unwrap() / 1_000_000;
    assert!(
        last_alive >= (stopped_at + 1) * 1_000,
        "the job kept running through SIGTERM: last alive {last_alive} ms, stopped at {stopped_at} s"
    );
    assert!(
        b_started > last_alive,
        "the next run started only after the stubborn one was gone ({b_started} > {last_alive} ms)"
    );
    let pid: i32 = read(&pid).trim().parse().unwrap();
    assert!(gone(pid), "SIGKILL ended the job after the grace period");
}

#[tokio::test]
async fn a_run_printing_5_mb_keeps_its_node_healthy_and_its_output_reaches_the_workload_page() {
    let mut live = Live::start().await;
    live.add_agent("n1", 2).await;
    let id = live
        .submit(
            "ada",
            job(
                "ai/olmo",
                "chatty",
                "seq 1 750000; echo the-end",
                1,
                60,
                false,
            ),
        )
        .await;
    let began = Instant::now();
    let mut states = Vec::new();
    let done = loop {
        let nodes = live.get("root", "/api/v1/nodes").await.1;
        states.push(nodes["nodes"][0]["state"].as_str().unwrap().to_string());
        let workload = live.workload(id).await;
        if workload["state"] == "succeeded" || began.elapsed() > Duration::from_secs(30) {
            break workload;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["state"], "succeeded", "{}", done["events"]);
    assert!(
        states.iter().all(|s| s == "healthy"),
        "the node stayed healthy: {states:?}"
    );
    eprintln!(
        "5 MB of output: workload succeeded with its output {} s after submission",
        began.elapsed().as_secs_f64()
    );
    let log = log_of(&live, id).await;
    assert!(log.len() <= (1 << 20) + 200, "the page keeps the last MiB");
    assert!(
        log.ends_with("749999\n750000\nthe-end\n"),
        "{:?}",
        &log[log.len() - 40..]
    );
    // The tail that arrived is whole: consecutive numbers, nothing lost between chunks (the
    // first line may be cut).
    let numbers: Vec<u64> = log.lines().skip(1).filter_map(|l| l.parse().ok()).collect();
    assert!(numbers.len() > 100_000, "{} lines", numbers.len());
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1));
}

/// A fake `nvidia-smi` listing two GPUs; it reports an Xid error while `<dir>/xid` exists.
fn fake_nvidia_smi(dir: &Path) {
    let script = format!(
        r#"#!/bin/sh
case "$*" in
  *index,name,uuid*) printf '0, NVIDIA H200, GPU-0\n1, NVIDIA H200, GPU-1\n' ;;
  *)
    if [ -e "{dir}/xid" ]; then
      echo "Xid 79 (PCI:0000:3b:00): GPU has fallen off the bus." >&2
    fi
    printf '0, GPU-0, 0\n1, GPU-1, 0\n' ;;
esac
"#,
        dir = dir.display()
    );
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn node(live: &Live, name: &str) -> Value {
    live.get("root", "/api/v1/nodes").await.1["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap()
        .clone()
}

#[tokio::test]
async fn an_xid_error_from_nvidia_smi_drains_the_node_and_the_workload_says_why() {
    let live = Live::start().await;
    let fake = tempfile::tempdir().unwrap();
    fake_nvidia_smi(fake.path());
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (_, token) = node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let mut args = agent_args(&live.url, "n1", "auto", &token).to_vec();
    args.extend(["--health-interval-s", "1"]);
    let _agent = AgentProcess::spawn_with_env(&args, None, &[("PATH", path)]);
    live.wait_for_node("n1", "healthy").await;
    assert_eq!(node(&live, "n1").await["gpu_model"], "NVIDIA H200");

    let id = live
        .submit("ada", job("ai/olmo", "train", "sleep 60", 2, 1, true))
        .await;
    live.wait_for_state(id, "running").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;

    std::fs::write(fake.path().join("xid"), "").unwrap();
    let failed = Instant::now();
    live.wait_for_node("n1", "unhealthy").await;
    eprintln!(
        "failed health check to \"unhealthy\" in the API: {:.1} s (checks every 1 s)",
        failed.elapsed().as_secs_f64()
    );
    let unhealthy = node(&live, "n1").await;
    assert!(
        unhealthy["health_reason"]
            .as_str()
            .unwrap()
            .contains("Xid 79"),
        "{unhealthy}"
    );
    assert!(unhealthy["unhealthy_since"].as_i64().is_some());

    // Past its minimum runtime, the workload drains without a human and goes back to the queue.
    let queued = live.wait_for_state(id, "queued").await;
    let drained = queued["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "drained")
        .unwrap()
        .clone();
    assert_eq!(drained["detail"]["rule"], "host-unhealthy");
    assert!(drained["detail"]["node_reason"]
        .as_str()
        .unwrap()
        .contains("GPU has fallen off the bus"));

    // Healthy again, the node stays out until an admin returns it (auto-recovery is off)…
    std::fs::remove_file(fake.path().join("xid")).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(node(&live, "n1").await["state"], "unhealthy");
    let (status, body) = live
        .post("root", "/api/v1/nodes/n1/uncordon", json!({}))
        .await;
    assert!(status.is_success(), "{body}");
    live.wait_for_node("n1", "healthy").await;
    assert_eq!(node(&live, "n1").await["health_reason"], Value::Null);
    live.wait_for_state(id, "running").await;

    // …or by itself where the operator allows it.
    sqlx::query(
        "insert into setting (key, value, updated_at) values ('auto_recover_nodes', 'true', 0)",
    )
    .execute(&live.app.pool)
    .await
    .unwrap();
    std::fs::write(fake.path().join("xid"), "").unwrap();
    live.wait_for_node("n1", "unhealthy").await;
    std::fs::remove_file(fake.path().join("xid")).unwrap();
    live.wait_for_node("n1", "healthy").await;
}

#[tokio::test]
async fn a_sync_body_over_the_limit_is_refused_clearly_and_the_heartbeat_still_counts() {
    let live = Live::start().await;
    let (node, token) =
        node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
            .await
            .unwrap();
    assert!(node.last_heartbeat_at.is_none());
    let huge = json!({ "gpus": 2, "output": [{ "run_id": 1, "offset": 0, "len": 5, "data": "x".repeat(5 << 20) }] });
    let response = live
        .http
        .post(format!("{}/api/agent/v1/sync", live.url))
        .bearer_auth(&token)
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("A sync report is at most 4 MiB"),
        "{body}"
    );
    let node = server::nodes::repo::find_node_by_name(&live.app.pool, "n1")
        .await
        .unwrap()
        .unwrap();
    assert!(
        node.last_heartbeat_at.is_some(),
        "the heartbeat was recorded"
    );

    let response = live
        .http
        .post(format!("{}/api/agent/v1/sync", live.url))
        .bearer_auth(&token)
        .body("{ not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn an_agent_shut_down_stops_its_runs_waits_for_them_and_requeues_resumable_work() {
    let config = server::runtime::config::RuntimeConfig {
        grace: 2,
        ..fast_config()
    };
    let live = Live::start_with(config).await;
    let (_, token) = node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let args = agent_args(&live.url, "n1", "1", &token);
    let mut agent = AgentProcess::spawn(&args, None);
    live.wait_for_node("n1", "healthy").await;
    let files = tempfile::tempdir().unwrap();
    let pid = files.path().join("pid");
    let stubborn = format!("trap '' TERM; echo $$ > {}; sleep 600", pid.display());
    let id = live
        .submit("ada", job("ai/olmo", "stubborn", &stubborn, 1, 1, true))
        .await;
    live.wait_for_state(id, "running").await;
    // "Running" is the server's word; the agent starts the process on its next sync.
    let job_pid = wait_for_pid(&pid).await;

    let asked = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), agent.child.wait())
        .await
        .expect("the agent exits once its runs are gone")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "it waited out the grace period"
    );
    assert!(gone(job_pid), "no run outlives its agent");
    let queued = live.wait_for_state(id, "queued").await;
    let stopped = queued["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "drained")
        .unwrap()
        .clone();
    assert_eq!(stopped["detail"]["rule"], "agent-stopped", "{stopped}");
    assert_eq!(stopped["detail"]["then"], "requeued");
}

/// A throwaway CA and a `localhost` certificate it signed, made with the openssl CLI.
fn make_certificates(dir: &Path) {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs (scripts/test.sh installs it)");
        assert!(status.success(), "openssl {args:?}");
    };
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=Hourglass test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    ]
    .concat());
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
}

/// A TLS-terminating proxy (as an operator would put in front of the server): HTTPS on its own
/// port, plain HTTP to `upstream`. Returns its port.
async fn tls_proxy(dir: &Path, upstream: String) -> u16 {
    use tokio_rustls::rustls::{
        self,
        pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(inbound).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn the_agent_speaks_https_to_a_tls_proxy_trusting_the_ca_it_is_given() {
    let live = Live::start().await;
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let port = tls_proxy(
        certs.path(),
        live.url.trim_start_matches("http://").to_string(),
    )
    .await;
    let https = format!("https://localhost:{port}");

    // Without the CA, the certificate is refused.
    server::agent::client::install_tls_provider();
    let untrusting = reqwest::Client::new()
        .get(format!("{https}/healthz"))
        .send()
        .await;
    assert!(untrusting.is_err(), "an unknown CA is not trusted");

    let (_, token) = node_service::register_node(&live.app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let ca = certs.path().join("ca.pem");
    let mut args = agent_args(&https, "n1", "1", &token).to_vec();
    args.extend(["--ca-cert", ca.to_str().unwrap()]);
    let _agent = AgentProcess::spawn(&args, None);
    live.wait_for_node("n1", "healthy").await;
    let id = live
        .submit(
            "ada",
            job("ai/olmo", "over-tls", "echo through-tls", 1, 60, false),
        )
        .await;
    live.wait_for_state(id, "succeeded").await;
    assert!(log_of(&live, id).await.contains("through-tls"));
}

#[tokio::test]
async fn a_state_directory_from_another_database_is_dropped_not_mistaken_for_this_servers_runs() {
    let first = Live::start().await;
    // Both registrations in the same second, as node 1 of their databases: nothing but a random
    // key tells them apart.
    let registered_at = crate::support::now();
    let (_, token) = node_service::register_node(&first.app.pool, "n1", None, registered_at)
        .await
        .unwrap();
    let mut agent = AgentProcess::spawn(&agent_args(&first.url, "n1", "1", &token), None);
    first.wait_for_node("n1", "healthy").await;
    let files = tempfile::tempdir().unwrap();
    let pid = files.path().join("pid");
    let old = first
        .submit(
            "ada",
            job(
                "ai/olmo",
                "old",
                // Deaf to SIGTERM: a stop would take the whole grace period.
                &format!("trap '' TERM; echo $$ > {}; sleep 60", pid.display()),
                1,
                60,
                false,
            ),
        )
        .await;
    first.wait_for_state(old, "running").await;
    wait_for_pid(&pid).await;
    agent.kill_hard().await;
    let state = std::mem::replace(&mut agent.state, tempfile::tempdir().unwrap());
    drop(agent);

    // A new database: its run ids start at 1 again, like the old server's. Its grace period is
    // long, so an agent that took the old run 1 for this server's would still be stopping it
    // when this server hands out its own run 1, and would never start that one.
    let second = Live::start_with(server::runtime::config::RuntimeConfig {
        grace: 30,
        ..fast_config()
    })
    .await;
    let (_, token) = node_service::register_node(&second.app.pool, "n1", None, registered_at)
        .await
        .unwrap();
    let _agent = AgentProcess::spawn(&agent_args(&second.url, "n1", "1", &token), Some(state));
    second.wait_for_node("n1", "healthy").await;
    let new = second
        .submit("ada", job("ai/olmo", "new", "echo fresh", 1, 60, false))
        .await;
    second.wait_for_state(new, "succeeded").await;
    assert!(log_of(&second, new).await.contains("fresh"));
    let old_pid: i32 = read(&pid).trim().parse().unwrap();
    assert!(gone(old_pid), "the other database's run was ended");
}

#[tokio::test]
async fn the_nodes_page_says_why_a_node_is_unhealthy_and_since_when() {
    let app = crate::support::TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let (node, _) = node_service::register_node(&app.pool, "gpu-7", None, crate::support::now())
        .await
        .unwrap();
    server::nodes::repo::touch_heartbeat(&app.pool, node.node_id, 1_000)
        .await
        .unwrap();
    server::nodes::repo::record_gpus(&app.pool, node.node_id, 8, "NVIDIA H200")
        .await
        .unwrap();
    server::nodes::repo::set_agent_health(
        &app.pool,
        node.node_id,
        Some(("nvidia-smi: Xid 79: GPU has fallen off the bus", 1_000)),
    )
    .await
    .unwrap();
    let cookie = app.sign_in("root", "long enough 1").await;
    let page = app.get("/nodes", Some(&cookie)).await;
    assert!(
        page.body.contains("Health check failed since"),
        "the page names the failure"
    );
    assert!(page.body.contains("Xid 79: GPU has fallen off the bus"));
    assert!(page.body.contains("health-unhealthy"));
}

#[tokio::test]
async fn when_one_node_of_a_multi_node_workload_exits_the_other_nodes_agent_is_told_to_stop_at_once(
) {
    // Agents' syncs are held up to a third of the heartbeat deadline: 20 s here, so only an
    // announcement that names the other node answers its held sync in time.
    let config = server::runtime::config::RuntimeConfig {
        heartbeat_deadline: 60,
        ..fast_config()
    };
    let mut live = Live::start_with(config).await;
    live.add_agent("n1", 2).await;
    live.add_agent("n2", 2).await;
    let files = tempfile::tempdir().unwrap();
    let (first, second) = (files.path().join("first"), files.path().join("second"));
    // Both parts run the command: the first to start fails once the other has started too; the
    // other would run for 10 minutes.
    let command = format!(
        "if mkdir {first}; then while [ ! -e {second} ]; do sleep 0.1; done; exit 3; \
         else touch {second}; exec sleep 600; fi",
        first = first.display(),
        second = second.display()
    );
    let id = live
        .submit("ada", job("ai/olmo", "pair", &command, 4, 900, false))
        .await;
    let failed = live.wait_for_state(id, "failed").await;
    assert_eq!(failed["exit_code"], 3, "{}", failed["events"]);
    let ended = Instant::now();
    loop {
        let open: i64 = sqlx::query_scalar(
            "select count(*) from workload_run where workload_id = $1 and released_at is null",
        )
        .bind(id)
        .fetch_one(&live.app.pool)
        .await
        .unwrap();
        if open == 0 {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "the other node still runs its part {:?} after the workload failed",
            ended.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let runs = runs_of(&live, id).await;
    assert_eq!(runs, 2, "one run on each node");
}

async fn stored_heartbeat(app: &crate::support::TestApp, name: &str) -> Option<i64> {
    server::nodes::repo::find_node_by_name(&app.pool, name)
        .await
        .unwrap()
        .unwrap()
        .last_heartbeat_at
}

#[tokio::test]
async fn a_live_nodes_heartbeats_are_written_in_a_batch_within_a_second_and_by_the_pass_before_it_looks_for_silent_nodes(
) {
    let app = crate::support::TestApp::new().await;
    let now = crate::support::now();
    let (node, token) = node_service::register_node(&app.pool, "n1", None, now)
        .await
        .unwrap();
    let report = json!({ "gpus": 2 });
    let sync = || app.post_json("/api/agent/v1/sync", &token, &report);
    // Never heard from: written before the sync goes on.
    assert_eq!(sync().await.status, reqwest::StatusCode::OK);
    assert!(stored_heartbeat(&app, "n1")
        .await
        .is_some_and(|at| at >= now));

    // Heard from 5 s ago (of a 30 s deadline): noted, and written within a second.
    server::nodes::repo::touch_heartbeat(&app.pool, node.node_id, now - 5)
        .await
        .unwrap();
    assert_eq!(sync().await.status, reqwest::StatusCode::OK);
    assert_eq!(stored_heartbeat(&app, "n1").await, Some(now - 5));
    let noted = app.runtime.heartbeats().pending();
    assert!(matches!(noted[..], [(id, at)] if id == node.node_id && at >= now));
    let waited = std::time::Instant::now();
    while stored_heartbeat(&app, "n1").await == Some(now - 5) {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "the noted heartbeat was never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(app.runtime.heartbeats().pending().is_empty());

    // Stored as silent past the deadline while a heartbeat is noted: the pass writes it before it
    // looks for silent nodes, so the node is not taken down.
    let later = crate::support::now();
    server::nodes::repo::touch_heartbeat(&app.pool, node.node_id, later - 31)
        .await
        .unwrap();
    app.runtime
        .heartbeats()
        .note(&app.pool, node.node_id, later);
    app.runtime.pass(later).await.unwrap();
    let row = server::nodes::repo::find_node_by_name(&app.pool, "n1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.last_heartbeat_at, Some(later));
    assert_eq!(row.down_since, None, "a node that spoke is not down");
    assert!(app.runtime.heartbeats().pending().is_empty());
}

#[tokio::test]
async fn only_a_nodes_newest_sync_numbers_an_answer_once_a_newer_one_has() {
    let app = crate::support::TestApp::new().await;
    let (node, _) = node_service::register_node(&app.pool, "n1", None, crate::support::now())
        .await
        .unwrap();
    let heartbeats = app.runtime.heartbeats();
    let (older, newer) = (heartbeats.sync_number(), heartbeats.sync_number());
    let answer = |sync| server::agent::repo::next_answer(&app.pool, node.node_id, sync);
    assert_eq!(answer(newer).await.unwrap(), Some(1));
    assert_eq!(
        answer(older).await.unwrap(),
        None,
        "a sync the agent gave up on numbers nothing after a newer one handed out runs"
    );
    assert_eq!(answer(newer).await.unwrap(), Some(2));
    assert_eq!(answer(heartbeats.sync_number()).await.unwrap(), Some(3));
}

#[tokio::test]
async fn a_node_token_cannot_end_or_write_the_output_of_another_nodes_run_nor_speak_as_that_node() {
    let app = crate::support::TestApp::new().await;
    let (n1_token, token) = crate::support::seed_org(&app.pool).await;
    let (_, n2_token) = node_service::register_node(&app.pool, "n2", None, crate::support::now())
        .await
        .unwrap();
    let n1 = app
        .post_json(
            "/api/agent/v1/sync",
            &n1_token,
            &json!({ "name": "n1", "gpus": 2 }),
        )
        .await;
    assert_eq!(n1.status, reqwest::StatusCode::OK, "{}", n1.body);
    let body = json!({ "project": "ai/olmo", "name": "w", "command": "sleep 60", "gpus": 2,
                       "min_runtime_s": 60, "resumable": true, "priority": 0 });
    let submitted = app.post_json("/api/v1/workloads", &token, &body).await;
    assert_eq!(
        submitted.status,
        reqwest::StatusCode::CREATED,
        "{}",
        submitted.body
    );
    let id = submitted.json()["id"].as_i64().unwrap();
    app.runtime.pass(crate::support::now()).await.unwrap();
    let (run_id,): (i64,) =
        sqlx::query_as("select workload_run_id from workload_run where workload_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();

    // n2's token claims n1's run ended and sends output for it: neither is taken.
    let forged = json!({ "name": "n2", "gpus": 2,
        "finished": [{ "run_id": run_id, "exit_code": 0 }],
        "output": [{ "run_id": run_id, "offset": 0, "len": 6, "data": "forged" }] });
    let sync = app
        .post_json("/api/agent/v1/sync", &n2_token, &forged)
        .await;
    assert_eq!(sync.status, reqwest::StatusCode::OK, "{}", sync.body);
    let (state, ended): (String, Option<i64>) = sqlx::query_as(
        "select w.state, r.ended_at from workload w join workload_run r on r.workload_id = w.workload_id
         where r.workload_run_id = $1",
    )
    .bind(run_id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), ended), ("running", None));
    let log = app
        .send(
            axum::http::Request::get(format!("/api/v1/workloads/{id}/log"))
                .header("authorization", format!("Bearer {token}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(log.status, reqwest::StatusCode::OK, "{}", log.body);
    assert!(!log.body.contains("forged"), "{}", log.body);

    // Nor may n2's token speak as n1.
    let posing = app
        .post_json(
            "/api/agent/v1/sync",
            &n2_token,
            &json!({ "name": "n1", "gpus": 2 }),
        )
        .await;
    assert_eq!(
        posing.status,
        reqwest::StatusCode::CONFLICT,
        "{}",
        posing.body
    );
}
