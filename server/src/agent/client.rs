//! `hourglass agent`: runs on a GPU host. It syncs with the server (heartbeat, report, long poll),
//! starts each assigned run under `sh -c` with `CUDA_VISIBLE_DEVICES` set to its GPUs, keeps the
//! last 1 MiB of its output, reports exit codes, and stops runs with SIGTERM, a grace period, then
//! SIGKILL. A lost connection is retried; processes keep running meanwhile.

use super::{
    gpus,
    protocol::{Assignment, Finished, LogTail, SyncRequest, SyncResponse},
};
use crate::ServerError;
use std::{
    collections::{BTreeMap, VecDeque},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{io::AsyncReadExt, sync::mpsc};

/// What `hourglass agent` was asked to do.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub server: String,
    pub token: String,
    pub name: Option<String>,
    /// A GPU count or `auto`.
    pub gpus: String,
    /// Seconds the server may hold a sync while nothing changes.
    pub poll_s: u64,
}

const LOG_LIMIT: usize = 1 << 20;

/// The last [`LOG_LIMIT`] bytes of a run's output.
#[derive(Default)]
struct LogBuffer {
    bytes: VecDeque<u8>,
    version: u64,
}

impl LogBuffer {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let excess = self.bytes.len().saturating_sub(LOG_LIMIT);
        self.bytes.drain(..excess);
        self.version += 1;
    }

    fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

struct Run {
    pgid: i32,
    log: Arc<Mutex<LogBuffer>>,
    sent_version: u64,
    stopping: bool,
}

pub async fn run(options: AgentOptions) -> Result<(), ServerError> {
    let gpus = gpus::discover(&options.gpus).await?;
    let url = format!("{}/api/agent/v1/sync", options.server.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| ServerError::Config(format!("cannot build the HTTP client: {e}")))?;
    tracing::info!(server = %options.server, gpus = gpus.count, model = %gpus.model, "agent starting");
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<(i64, i32)>();
    let mut runs: BTreeMap<i64, Run> = BTreeMap::new();
    let mut finished: Vec<Finished> = Vec::new();
    let mut grace = 10;
    let mut connected = false;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    loop {
        while let Ok((run_id, code)) = exit_rx.try_recv() {
            record_exit(&mut runs, &mut finished, run_id, code);
        }
        let logs: Vec<LogTail> = runs
            .iter()
            .filter(|(_, r)| !r.stopping)
            .filter_map(|(&run_id, r)| {
                let log = r.log.lock().ok()?;
                (log.version != r.sent_version).then(|| LogTail {
                    run_id,
                    tail: log.text(),
                })
            })
            .collect();
        let request = SyncRequest {
            name: options.name.clone(),
            gpus: gpus.count,
            gpu_model: gpus.model.clone(),
            healthy: true,
            running: runs
                .iter()
                .filter(|(_, r)| !r.stopping)
                .map(|(&id, _)| id)
                .collect(),
            finished: finished.clone(),
            logs,
            wait_s: if connected && finished.is_empty() {
                options.poll_s
            } else {
                0
            },
        };
        let send = client
            .post(&url)
            .bearer_auth(options.token.trim())
            .json(&request)
            .timeout(Duration::from_secs(request.wait_s + 15))
            .send();
        tokio::select! {
            result = send => match result {
                Ok(response) if response.status().is_success() => match response.json::<SyncResponse>().await {
                    Ok(answer) => {
                        if !connected {
                            tracing::info!(node = %answer.node, "connected");
                        }
                        connected = true;
                        finished.clear();
                        for log in &request.logs {
                            if let Some(run) = runs.get_mut(&log.run_id) {
                                run.sent_version = run.log.lock().map(|l| l.version).unwrap_or(0);
                            }
                        }
                        grace = answer.grace_s.max(0);
                        for run_id in answer.stop {
                            stop(&mut runs, run_id, grace);
                        }
                        for assignment in answer.start {
                            start(&mut runs, &mut finished, assignment, &exit_tx);
                        }
                    }
                    Err(error) => retry(&mut connected, format!("unreadable answer: {error}")).await,
                },
                Ok(response) => {
                    let status = response.status();
                    let body = response.text().await.unwrap_or_default();
                    if status == reqwest::StatusCode::UNAUTHORIZED {
                        stop_all(&mut runs, grace);
                        return Err(ServerError::Config(format!("the server refused the node token: {body}")));
                    }
                    retry(&mut connected, format!("server answered {status}: {body}")).await;
                }
                Err(error) => retry(&mut connected, format!("cannot reach the server: {error}")).await,
            },
            Some((run_id, code)) = exit_rx.recv() => record_exit(&mut runs, &mut finished, run_id, code),
            _ = &mut shutdown => {
                tracing::info!("agent stopping; ending its runs");
                stop_all(&mut runs, grace);
                return Ok(());
            }
        }
    }
}

async fn retry(connected: &mut bool, why: String) {
    if *connected {
        tracing::warn!(%why, "lost the server; processes keep running, retrying");
    } else {
        tracing::warn!(%why, "cannot sync yet; retrying");
    }
    *connected = false;
    tokio::time::sleep(Duration::from_secs(1)).await;
}

fn record_exit(
    runs: &mut BTreeMap<i64, Run>,
    finished: &mut Vec<Finished>,
    run_id: i64,
    code: i32,
) {
    if let Some(run) = runs.remove(&run_id) {
        tracing::info!(run_id, code, stopped = run.stopping, "process ended");
        if !run.stopping {
            let log_tail = run.log.lock().map(|l| l.text()).unwrap_or_default();
            finished.push(Finished {
                run_id,
                exit_code: code,
                log_tail,
            });
        }
    }
}

fn start(
    runs: &mut BTreeMap<i64, Run>,
    finished: &mut Vec<Finished>,
    assignment: Assignment,
    exit_tx: &mpsc::UnboundedSender<(i64, i32)>,
) {
    if runs.contains_key(&assignment.run_id) {
        return;
    }
    let visible = assignment
        .gpu_indices
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&assignment.command)
        .env("CUDA_VISIBLE_DEVICES", &visible)
        .env("HOURGLASS_WORKLOAD_ID", assignment.workload_id.to_string())
        .env("HOURGLASS_RUN_ID", assignment.run_id.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if assignment.resumed {
        command.env("HOURGLASS_RESUMED", "1");
    } else {
        command.env_remove("HOURGLASS_RESUMED");
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            finished.push(Finished {
                run_id: assignment.run_id,
                exit_code: 127,
                log_tail: format!("hourglass agent: could not start `sh -c`: {error}\n"),
            });
            return;
        }
    };
    tracing::info!(run_id = assignment.run_id, workload = %assignment.name, gpus = %visible, "started");
    let log = Arc::new(Mutex::new(LogBuffer::default()));
    let readers: Vec<_> = [
        child.stdout.take().map(Pipe::Out),
        child.stderr.take().map(Pipe::Err),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| {
        let log = log.clone();
        tokio::spawn(async move { pipe.copy_into(log).await })
    })
    .collect();
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    let run_id = assignment.run_id;
    let exit_tx = exit_tx.clone();
    tokio::spawn(async move {
        let code = match child.wait().await {
            Ok(status) => status.code().unwrap_or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                128 + status.signal().unwrap_or(0)
            }),
            Err(_) => 255,
        };
        // Let the readers drain what the process wrote before it exited (a background child
        // holding the pipe open must not delay the report for long).
        let _ =
            tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(readers)).await;
        let _ = exit_tx.send((run_id, code));
    });
    runs.insert(
        run_id,
        Run {
            pgid,
            log,
            sent_version: 0,
            stopping: false,
        },
    );
}

enum Pipe {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
}

impl Pipe {
    async fn copy_into(self, log: Arc<Mutex<LogBuffer>>) {
        let mut buffer = vec![0u8; 8192];
        let mut reader: Box<dyn tokio::io::AsyncRead + Unpin + Send> = match self {
            Pipe::Out(out) => Box::new(out),
            Pipe::Err(err) => Box::new(err),
        };
        while let Ok(n) = reader.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            if let Ok(mut log) = log.lock() {
                log.push(&buffer[..n]);
            }
        }
    }
}

/// SIGTERM to the run's process group now, SIGKILL after the grace period.
fn stop(runs: &mut BTreeMap<i64, Run>, run_id: i64, grace: i64) {
    let Some(run) = runs.get_mut(&run_id) else {
        return;
    };
    if run.stopping || run.pgid <= 0 {
        return;
    }
    run.stopping = true;
    let pgid = run.pgid;
    tracing::info!(run_id, grace, "stopping");
    signal_group(pgid, libc::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(grace.max(0) as u64)).await;
        signal_group(pgid, libc::SIGKILL);
    });
}

fn stop_all(runs: &mut BTreeMap<i64, Run>, grace: i64) {
    let ids: Vec<i64> = runs.keys().copied().collect();
    for id in ids {
        stop(runs, id, grace);
    }
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group we created; no memory is shared.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = terminate => {},
    }
}
