//! `hourglass agent`: runs on a GPU host. It syncs with the server (heartbeat, health, report,
//! long poll), starts each assigned run exactly once as a process group with
//! `CUDA_VISIBLE_DEVICES` set to its GPUs, ships its output in bounded chunks, and stops runs
//! with SIGTERM, a grace period, then SIGKILL — also when it shuts down, which waits for that.
//! Everything it runs is recorded in its state directory first, so an agent that restarts
//! re-adopts its runs (or reports how they ended) instead of starting them again.

use super::{
    gpus,
    health::HealthChecks,
    output::utf8_prefix,
    process::{self, Launch, ProcTable},
    protocol::{
        Assignment, Finished, GpuSample, OutputChunk, SyncRequest, SyncResponse, CHUNK_BYTES,
        SYNC_OUTPUT_BYTES, SYNC_SAMPLES,
    },
    sampling,
    state::{AgentState, RunRecord, StateDir, StopRecord},
};
use crate::ServerError;
use backon::{BackoffBuilder, ExponentialBuilder};
use std::{collections::BTreeMap, os::unix::fs::FileExt, path::PathBuf, time::Duration};
use tokio::sync::{mpsc, watch};

/// What `hourglass agent` was asked to do.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub server: String,
    pub token: String,
    pub name: Option<String>,
    /// The cluster the node was registered in, checked by the server.
    pub cluster: Option<String>,
    /// A GPU count or `auto`.
    pub gpus: String,
    /// Seconds the server may hold a sync while nothing changes.
    pub poll_s: u64,
    /// Where the agent records its runs (see [`super::state`]).
    pub state_dir: PathBuf,
    /// An operator's health check: non-zero exit = unhealthy, first output line = the reason.
    pub health_cmd: Option<String>,
    pub health_interval_s: u64,
    /// Seconds between GPU samples (`nvidia-smi`, with `--gpus auto`); 0: none.
    pub sample_every_s: u32,
    /// Make up plausible samples for simulated GPUs (the demo's nodes) every `sample_every_s`.
    pub simulate_utilization: bool,
    /// A PEM file of CA certificates to trust besides the system's (a private CA).
    pub ca_cert: Option<PathBuf>,
}

/// The server keeps the last MiB of a run's output; older unsent output is skipped.
const OUTPUT_KEEP: u64 = 1 << 20;
/// A run's `.out` file is emptied once it grows past this (its offsets continue).
const OUTPUT_FILE_MAX: u64 = 16 << 20;

fn epoch_now() -> i64 {
    epoch_ms() / 1000
}

/// The agent is a process of its own, on its node's clock.
fn epoch_ms() -> i64 {
    crate::clock::Clock::system().now_ms()
}

pub async fn run(options: AgentOptions) -> Result<(), ServerError> {
    let gpus = gpus::discover(&options.gpus).await?;
    let client = http_client(&options)?;
    let dir = StateDir::open(&options.state_dir)?;
    let mut agent = Agent::new(options, gpus, dir)?;
    agent.sync_loop(&client).await
}

/// The HTTP(S) client: rustls with the system's roots, plus `--ca-cert` if given.
fn http_client(options: &AgentOptions) -> Result<reqwest::Client, ServerError> {
    install_tls_provider();
    let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
    if let Some(path) = &options.ca_cert {
        let pem = std::fs::read(path).map_err(|e| {
            ServerError::Config(format!("cannot read --ca-cert {}: {e}", path.display()))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ServerError::Config(format!(
                "--ca-cert {} holds no PEM certificate: {e}",
                path.display()
            ))
        })?;
        if certs.is_empty() {
            return Err(ServerError::Config(format!(
                "--ca-cert {} holds no PEM certificate",
                path.display()
            )));
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| ServerError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Makes rustls (with `ring`) the process's TLS provider, which every `reqwest` client here
/// needs; harmless when called again (several agents run in one process in the demo).
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

enum SyncError {
    Refused(String),
    Failed(String),
}

struct Agent {
    options: AgentOptions,
    gpus: gpus::Gpus,
    dir: StateDir,
    state: AgentState,
    /// Exit codes of run leaders this process started and reaped.
    leader_exits: BTreeMap<i64, i32>,
    exits_tx: mpsc::UnboundedSender<(i64, i32)>,
    exits_rx: mpsc::UnboundedReceiver<(i64, i32)>,
    /// The server's received output offset per run (unknown after a restart until it says).
    received: BTreeMap<i64, u64>,
    health: Result<(), String>,
    grace: i64,
    connected: bool,
    /// GPU samples not yet carried by an answered sync, oldest first.
    samples: Vec<GpuSample>,
    /// When the last simulated samples were made.
    simulated_at: i64,
}

/// The most GPU samples an agent keeps while it cannot reach the server (an hour of 24 GPUs
/// sampled every 10 s); older ones are dropped.
const SAMPLES_KEPT: usize = 8_640;

impl Agent {
    fn new(options: AgentOptions, gpus: gpus::Gpus, dir: StateDir) -> Result<Agent, ServerError> {
        let mut state = dir.load()?;
        adopt_pending(&dir, &mut state);
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let alive = state.runs.values().filter(|r| r.ended.is_none()).count();
        if alive > 0 {
            tracing::info!(runs = alive, "re-adopting the runs this node had");
        }
        dir.save(&state)?;
        Ok(Agent {
            options,
            gpus,
            dir,
            state,
            leader_exits: BTreeMap::new(),
            exits_tx,
            exits_rx,
            received: BTreeMap::new(),
            health: Ok(()),
            grace: 10,
            connected: false,
            samples: Vec::new(),
            simulated_at: 0,
        })
    }

    async fn sync_loop(&mut self, client: &reqwest::Client) -> Result<(), ServerError> {
        tracing::info!(server = %self.options.server, gpus = self.gpus.count, model = %self.gpus.model, "agent starting");
        let url = format!(
            "{}/api/agent/v1/sync",
            self.options.server.trim_end_matches('/')
        );
        let checks = self.health_checks();
        if checks.nvidia_gpus.is_some() || checks.command.is_some() {
            // The first report already says how the node is.
            self.health = checks.run().await;
        }
        let mut health =
            spawn_health_checks(checks, self.options.health_interval_s, self.health.clone());
        let mut samples = if self.options.gpus.trim() == "auto" && self.options.sample_every_s > 0 {
            sampling::spawn(self.options.sample_every_s, epoch_now)
        } else {
            // No GPUs to ask: a channel that never sends.
            tokio::sync::mpsc::channel(1).1
        };
        let shutdown = shutdown_signal();
        tokio::pin!(shutdown);
        let mut backoff = reconnect_backoff(self.state.down_after_s);
        let mut ticker = tokio::time::interval(Duration::from_millis(500));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pause_until: Option<tokio::time::Instant> = None;
        let token = self.options.token.clone();
        loop {
            self.tick();
            if let Some(until) = pause_until.take() {
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => {}
                    _ = &mut shutdown => return self.shut_down(client, &url).await,
                }
                continue;
            }
            let request = self.request();
            let send = send(client, &url, &token, &request);
            tokio::pin!(send);
            loop {
                tokio::select! {
                    result = &mut send => {
                        match result {
                            Ok(answer) => {
                                if !self.connected {
                                    tracing::info!(node = %answer.node, "connected");
                                }
                                self.connected = true;
                                backoff = reconnect_backoff(self.state.down_after_s);
                                let output_pending = self.apply(&request, answer);
                                if output_pending {
                                    // At most two output-carrying syncs a second per node.
                                    pause_until = Some(tokio::time::Instant::now() + Duration::from_millis(500));
                                }
                            }
                            Err(SyncError::Refused(why)) => {
                                self.stop_all("the server refused this node's token", true);
                                self.wait_for_runs().await;
                                return Err(ServerError::Config(format!("the server refused the node token: {why}")));
                            }
                            Err(SyncError::Failed(why)) => {
                                if self.connected {
                                    tracing::warn!(%why, "lost the server; runs keep running, retrying");
                                } else {
                                    tracing::warn!(%why, "cannot sync yet; retrying");
                                }
                                self.connected = false;
                                let delay = backoff.next().unwrap_or(Duration::from_secs(30));
                                pause_until = Some(tokio::time::Instant::now() + delay);
                            }
                        }
                        break;
                    }
                    _ = ticker.tick() => {
                        self.simulate_samples();
                        // A run that ended is reported at once (the held sync is dropped).
                        if self.tick() {
                            break;
                        }
                    }
                    Some((run_id, code)) = self.exits_rx.recv() => {
                        self.leader_exits.insert(run_id, code);
                        if self.tick() {
                            break;
                        }
                    }
                    Some(taken) = samples.recv() => {
                        // Carried by the next sync; a held one is cut short only once the
                        // oldest has waited three sampling intervals (longer than a poll at the
                        // defaults, so no sync is added then).
                        self.keep_samples(taken);
                        let carry_after = 3 * i64::from(self.options.sample_every_s);
                        if self.samples.first().is_some_and(|s| epoch_now() - s.at >= carry_after) {
                            break;
                        }
                    }
                    Ok(()) = health.changed() => {
                        let now = health.borrow_and_update().clone();
                        if now != self.health {
                            match &now {
                                Ok(()) => tracing::info!("health checks pass again"),
                                Err(reason) => tracing::warn!(%reason, "health check failed"),
                            }
                            self.health = now;
                            break;
                        }
                    }
                    _ = &mut shutdown => return self.shut_down(client, &url).await,
                }
            }
        }
    }

    /// The demo's made-up samples of the GPUs its runs hold, every `sample_every_s`.
    fn simulate_samples(&mut self) {
        let every = i64::from(self.options.sample_every_s);
        let now = epoch_now();
        if !self.options.simulate_utilization || every == 0 || now - self.simulated_at < every {
            return;
        }
        self.simulated_at = now;
        let runs: Vec<(i64, Vec<u32>)> = self
            .state
            .runs
            .values()
            .filter(|r| r.ended.is_none() && r.stop.is_none())
            .map(|r| (r.workload_id, r.gpus.clone()))
            .collect();
        self.keep_samples(sampling::simulated(&runs, now, self.options.sample_every_s));
    }

    /// Adds samples to those waiting for a sync, dropping the oldest beyond [`SAMPLES_KEPT`].
    fn keep_samples(&mut self, taken: Vec<GpuSample>) {
        self.samples.extend(taken);
        let over = self.samples.len().saturating_sub(SAMPLES_KEPT);
        self.samples.drain(..over);
    }

    fn health_checks(&self) -> HealthChecks {
        HealthChecks {
            nvidia_gpus: (self.options.gpus.trim() == "auto").then_some(self.gpus.count),
            command: self.options.health_cmd.clone(),
        }
    }

    /// The report for the next sync.
    fn request(&mut self) -> SyncRequest {
        // A run's end is reported once its output has all arrived, so a finished workload's page
        // shows its whole tail; until then the run counts as running (its GPUs stay busy).
        let finished: Vec<Finished> = self
            .state
            .runs
            .iter()
            .filter(|(&id, r)| !r.end_acknowledged && self.output_shipped(id, r))
            .filter_map(|(_, r)| r.ended.clone())
            .collect();
        let running = self
            .state
            .runs
            .iter()
            .filter(|(&id, r)| !r.end_acknowledged && !finished.iter().any(|f| f.run_id == id))
            .map(|(&id, _)| id)
            .collect();
        let output = self.output_chunks();
        let wait_s = if self.connected && finished.is_empty() && output.is_empty() {
            self.options.poll_s
        } else {
            0
        };
        SyncRequest {
            name: self.options.name.clone(),
            cluster: self.options.cluster.clone(),
            gpus: self.gpus.count,
            gpu_model: self.gpus.model.clone(),
            healthy: self.health.is_ok(),
            health_reason: self.health.clone().err(),
            running,
            finished,
            output,
            last_answer: self.state.last_answer,
            wait_s,
            samples: self.samples.iter().take(SYNC_SAMPLES).cloned().collect(),
        }
    }

    fn output_shipped(&self, run_id: i64, run: &RunRecord) -> bool {
        let len = std::fs::metadata(self.dir.output_path(run_id))
            .map(|m| m.len())
            .unwrap_or(0);
        run.pgid == 0
            || self
                .received
                .get(&run_id)
                .is_some_and(|&r| r >= run.output_base + len)
    }

    /// New output of every run, at most one bounded chunk per run and [`SYNC_OUTPUT_BYTES`] in
    /// all, from where the server says it is (skipping ahead when it is more than a MiB behind).
    fn output_chunks(&mut self) -> Vec<OutputChunk> {
        let mut chunks = Vec::new();
        let mut budget = SYNC_OUTPUT_BYTES;
        for (&run_id, run) in &self.state.runs {
            let Some(&received) = self.received.get(&run_id) else {
                // After a restart: an empty chunk asks the server how much it has.
                chunks.push(OutputChunk {
                    run_id,
                    offset: 0,
                    len: 0,
                    data: String::new(),
                });
                continue;
            };
            let path = self.dir.output_path(run_id);
            let Ok(file) = std::fs::File::open(&path) else {
                continue;
            };
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let end = run.output_base + len;
            if end <= received || budget == 0 {
                continue;
            }
            let from = received
                .max(end.saturating_sub(OUTPUT_KEEP))
                .max(run.output_base);
            let want = ((end - from) as usize).min(CHUNK_BYTES).min(budget);
            let mut bytes = vec![0u8; want];
            let Ok(n) = file.read_at(&mut bytes, from - run.output_base) else {
                continue;
            };
            bytes.truncate(n);
            let mut cut = utf8_prefix(&bytes);
            if cut == 0 && !bytes.is_empty() && (run.ended.is_some() || bytes.len() >= 4) {
                cut = bytes.len();
            }
            if cut == 0 {
                continue;
            }
            budget -= cut;
            chunks.push(OutputChunk {
                run_id,
                offset: from,
                len: cut as u64,
                data: String::from_utf8_lossy(&bytes[..cut]).into_owned(),
            });
        }
        chunks
    }

    /// Acts on an answer; says whether output is still waiting to be sent.
    fn apply(&mut self, request: &SyncRequest, answer: SyncResponse) -> bool {
        let foreign = self
            .state
            .node_key
            .as_ref()
            .is_some_and(|key| !answer.node_key.is_empty() && *key != answer.node_key);
        if foreign {
            self.drop_foreign_state();
            // The report described runs this server never gave: say nothing about it.
            return false;
        }
        if !answer.node_key.is_empty() {
            self.state.node_key = Some(answer.node_key.clone());
        }
        self.state.last_synced_at = Some(epoch_now());
        self.state.down_after_s = answer.down_after_s;
        // The server has the samples the request carried (they were the oldest kept).
        let carried = request.samples.len().min(self.samples.len());
        self.samples.drain(..carried);
        self.grace = answer.grace_s.max(0);
        for finished in &request.finished {
            if let Some(run) = self.state.runs.get_mut(&finished.run_id) {
                run.end_acknowledged = true;
            }
        }
        for (run_id, at) in &answer.output_received {
            self.received.insert(*run_id, *at);
        }
        for probe in request.output.iter().filter(|c| c.len == 0) {
            // A run the server has no record of: there is nobody to send its output to.
            if !answer.output_received.contains_key(&probe.run_id) {
                self.received.insert(probe.run_id, u64::MAX);
            }
        }
        for run_id in &answer.stop {
            self.stop(*run_id, None, false);
        }
        if !answer.start.is_empty() {
            self.start_all(answer.start, answer.answer);
        }
        self.trim_output_files();
        let pending = self.forget_done();
        if let Err(error) = self.dir.save(&self.state) {
            tracing::error!(%error, "cannot save the agent state");
        }
        pending
    }

    /// Starts the answer's runs exactly once: each is recorded before its process exists, and the
    /// answer counts as acted on only once every process has its group recorded.
    fn start_all(&mut self, assignments: Vec<Assignment>, answer: i64) {
        let fresh: Vec<Assignment> = assignments
            .into_iter()
            .filter(|a| !self.state.runs.contains_key(&a.run_id))
            .collect();
        let now = epoch_now();
        for a in &fresh {
            self.state.runs.insert(
                a.run_id,
                RunRecord {
                    workload_id: a.workload_id,
                    name: a.name.clone(),
                    pgid: 0,
                    leader_start: 0,
                    gpus: a.gpu_indices.clone(),
                    started_at: now,
                    output_base: 0,
                    stop: None,
                    ended: None,
                    end_acknowledged: false,
                },
            );
        }
        if let Err(error) = self.dir.save(&self.state) {
            // Without a record the run could start twice after a crash: do not start it.
            tracing::error!(%error, "cannot record new runs; not starting them");
            for a in &fresh {
                self.state.runs.remove(&a.run_id);
            }
            return;
        }
        for a in fresh {
            let launch = Launch {
                command: &a.command,
                gpus: &a.gpu_indices,
                workload_id: a.workload_id,
                run_id: a.run_id,
                resumed: a.resumed,
                output: &self.dir.output_path(a.run_id),
                exit_file: &self.dir.exit_path(a.run_id),
            };
            let spawned = process::spawn(&launch);
            let run = self.state.runs.get_mut(&a.run_id).expect("recorded above");
            match spawned {
                Ok(mut child) => {
                    let pid = child.id().map(|id| id as i32).unwrap_or(0);
                    run.pgid = pid;
                    run.leader_start = process::start_time(pid).unwrap_or(0);
                    self.received.insert(a.run_id, 0);
                    tracing::info!(run_id = a.run_id, workload = %a.name, gpus = ?a.gpu_indices, "started");
                    let exits = self.exits_tx.clone();
                    let run_id = a.run_id;
                    tokio::spawn(async move {
                        let code = match child.wait().await {
                            Ok(status) => exit_code(status),
                            Err(_) => 255,
                        };
                        let _ = exits.send((run_id, code));
                    });
                }
                Err(error) => {
                    run.ended = Some(Finished {
                        run_id: a.run_id,
                        exit_code: Some(127),
                        note: Some(format!("the agent could not start `sh`: {error}")),
                        by_agent: false,
                    });
                }
            }
        }
        self.state.last_answer = self.state.last_answer.max(answer);
    }

    /// Looks at every run's processes: ends runs whose group is gone, kills those past their
    /// grace period, stops leftovers of commands that exited, and stops everything when the
    /// server has been out of reach past its deadline. Says whether a run ended.
    fn tick(&mut self) -> bool {
        let now = epoch_now();
        if self.cut_off(now) {
            let why = format!(
                "the agent could not reach the server for more than {} s, so the server has declared this node down and requeued its work",
                self.state.down_after_s
            );
            self.stop_all(&why, true);
        }
        if self.state.runs.values().all(|r| r.ended.is_some()) {
            return false;
        }
        let table = ProcTable::scan();
        let mut ended = false;
        let mut changed = false;
        let ids: Vec<i64> = self.state.runs.keys().copied().collect();
        for run_id in ids {
            let exit_file = self.dir.exit_path(run_id);
            let leader_exit = self.leader_exits.get(&run_id).copied();
            let run = self.state.runs.get_mut(&run_id).expect("listed");
            if run.ended.is_some() || run.pgid == 0 {
                continue;
            }
            if table.group_alive(run.pgid, run.leader_start) {
                if let Some(stop) = &mut run.stop {
                    if !stop.killed && epoch_ms() >= stop.kill_at_ms {
                        tracing::info!(run_id, "grace period over; SIGKILL");
                        process::kill(run.pgid);
                        stop.killed = true;
                        changed = true;
                    }
                } else if let Some(code) = leader_exit.or_else(|| {
                    // An adopted run's leader is not this agent's child: it is gone when /proc
                    // says so (it writes its exit file just before it exits, so the file alone
                    // does not mean the leader has gone).
                    (!table.process_alive(run.pgid))
                        .then(|| process::recorded_exit(&exit_file))
                        .flatten()
                }) {
                    // The command ended but left processes behind in its group: they go too.
                    let note = format!(
                        "the command exited with {code}; processes it left behind were stopped"
                    );
                    begin_stop(run, self.grace, Some(note), false);
                    changed = true;
                }
                continue;
            }
            let code = leader_exit.or_else(|| process::recorded_exit(&exit_file));
            let (mut note, by_agent) = run
                .stop
                .as_ref()
                .map(|s| (s.note.clone(), s.by_agent))
                .unwrap_or((None, false));
            if run.stop.as_ref().is_some_and(|s| s.killed) && note.is_none() {
                note = Some(format!(
                    "stopped with SIGKILL after the {} s grace period",
                    self.grace
                ));
            }
            if code.is_none() && note.is_none() {
                note = Some(
                    "the run ended while no agent was watching it, so its exit status is unknown"
                        .into(),
                );
            }
            tracing::info!(run_id, ?code, "run ended");
            run.ended = Some(Finished {
                run_id,
                exit_code: code,
                note,
                by_agent,
            });
            ended = true;
        }
        if ended || changed {
            if let Err(error) = self.dir.save(&self.state) {
                tracing::error!(%error, "cannot save the agent state");
            }
        }
        ended
    }

    fn cut_off(&self, now: i64) -> bool {
        self.state.down_after_s > 0
            && self
                .state
                .last_synced_at
                .is_some_and(|t| now - t > self.state.down_after_s)
            && self
                .state
                .runs
                .values()
                .any(|r| r.ended.is_none() && r.stop.is_none())
    }

    fn stop(&mut self, run_id: i64, note: Option<String>, by_agent: bool) {
        let grace = self.grace;
        if let Some(run) = self.state.runs.get_mut(&run_id) {
            if run.ended.is_none() && run.stop.is_none() {
                tracing::info!(run_id, grace, "stopping");
                begin_stop(run, grace, note, by_agent);
            }
        }
    }

    fn stop_all(&mut self, why: &str, by_agent: bool) {
        let ids: Vec<i64> = self.state.runs.keys().copied().collect();
        for run_id in ids {
            self.stop(run_id, Some(why.to_string()), by_agent);
        }
        if let Err(error) = self.dir.save(&self.state) {
            tracing::error!(%error, "cannot save the agent state");
        }
    }

    /// Waits until every run's processes are gone (SIGKILL at the end of each grace period).
    async fn wait_for_runs(&mut self) {
        let limit = tokio::time::Instant::now() + Duration::from_secs(self.grace as u64 + 15);
        while self
            .state
            .runs
            .values()
            .any(|r| r.ended.is_none() && r.pgid != 0)
        {
            if tokio::time::Instant::now() >= limit {
                tracing::error!("some runs' processes outlived SIGKILL; giving up waiting");
                break;
            }
            while let Ok((run_id, code)) = self.exits_rx.try_recv() {
                self.leader_exits.insert(run_id, code);
            }
            self.tick();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM to every run, SIGKILL after the grace period, wait for them, and tell the server.
    async fn shut_down(&mut self, client: &reqwest::Client, url: &str) -> Result<(), ServerError> {
        tracing::info!(grace = self.grace, "agent stopping; ending its runs");
        self.stop_all("the node's agent was shut down", true);
        self.wait_for_runs().await;
        let request = SyncRequest {
            wait_s: 0,
            ..self.request()
        };
        match tokio::time::timeout(
            Duration::from_secs(5),
            send(client, url, &self.options.token, &request),
        )
        .await
        {
            Ok(Ok(answer)) => {
                // Starts in a last answer are not taken: this agent is leaving.
                let answer = SyncResponse {
                    start: Vec::new(),
                    ..answer
                };
                self.apply(&request, answer);
            }
            _ => tracing::warn!(
                "could not tell the server how the runs ended; the next agent start will"
            ),
        }
        Ok(())
    }

    /// The state directory belongs to another registration of this node (another database, or
    /// the node registered anew): its runs are not this server's. Their processes are killed
    /// and the records dropped, so the next sync starts clean.
    fn drop_foreign_state(&mut self) {
        tracing::warn!(
            runs = self.state.runs.len(),
            "the state directory belongs to another registration of this node; ending its runs and starting afresh"
        );
        let table = ProcTable::scan();
        for (&run_id, run) in &self.state.runs {
            if run.ended.is_none() && table.group_alive(run.pgid, run.leader_start) {
                process::kill(run.pgid);
            }
            self.dir.forget(run_id);
        }
        self.state = AgentState::default();
        self.received.clear();
        self.leader_exits.clear();
        if let Err(error) = self.dir.save(&self.state) {
            tracing::error!(%error, "cannot save the agent state");
        }
    }

    /// Empties `.out` files that grew large once the server has everything up to their end.
    fn trim_output_files(&mut self) {
        for (&run_id, run) in self.state.runs.iter_mut() {
            let path = self.dir.output_path(run_id);
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let received = self.received.get(&run_id).copied().unwrap_or(0);
            if len >= OUTPUT_FILE_MAX && received + OUTPUT_KEEP >= run.output_base + len {
                if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&path) {
                    if file.set_len(0).is_ok() {
                        run.output_base += len;
                    }
                }
            }
        }
    }

    /// Drops runs the server has finished with (end acknowledged, output received); says
    /// whether some run still has output to send.
    fn forget_done(&mut self) -> bool {
        let mut pending = false;
        let mut done = Vec::new();
        for (&run_id, run) in &self.state.runs {
            let len = std::fs::metadata(self.dir.output_path(run_id))
                .map(|m| m.len())
                .unwrap_or(0);
            let end = run.output_base + len;
            let received = self.received.get(&run_id).copied();
            let shipped = received.is_some_and(|r| r >= end);
            if received.is_some() && !shipped {
                pending = true;
            }
            if run.end_acknowledged && (shipped || run.pgid == 0) {
                done.push(run_id);
            }
        }
        for run_id in done {
            self.state.runs.remove(&run_id);
            self.received.remove(&run_id);
            self.leader_exits.remove(&run_id);
            self.dir.forget(run_id);
        }
        pending
    }
}

fn begin_stop(run: &mut RunRecord, grace: i64, note: Option<String>, by_agent: bool) {
    process::terminate(run.pgid);
    let now = epoch_ms();
    run.stop = Some(StopRecord {
        term_at_ms: now,
        kill_at_ms: now + grace * 1000,
        killed: false,
        note,
        by_agent,
    });
}

/// Records written before their process existed (the agent died in between): find the process
/// by its exit file (which names this state directory and the run), or its recorded exit
/// status; otherwise it never started and the server will hand it out again (the answer was not
/// counted as acted on).
fn adopt_pending(dir: &StateDir, state: &mut AgentState) {
    let pending: Vec<i64> = state
        .runs
        .iter()
        .filter(|(_, r)| r.pgid == 0 && r.ended.is_none())
        .map(|(&id, _)| id)
        .collect();
    for run_id in pending {
        if let Some(pid) = process::find_run_leader(&dir.exit_path(run_id)) {
            let run = state.runs.get_mut(&run_id).expect("listed");
            run.pgid = pid;
            run.leader_start = process::start_time(pid).unwrap_or(0);
        } else if let Some(code) = process::recorded_exit(&dir.exit_path(run_id)) {
            let run = state.runs.get_mut(&run_id).expect("listed");
            run.ended = Some(Finished {
                run_id,
                exit_code: Some(code),
                note: None,
                by_agent: false,
            });
        } else {
            state.runs.remove(&run_id);
            dir.forget(run_id);
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

async fn send(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    request: &SyncRequest,
) -> Result<SyncResponse, SyncError> {
    let response = client
        .post(url)
        .bearer_auth(token.trim())
        .json(request)
        .timeout(Duration::from_secs(request.wait_s + 15))
        .send()
        .await
        .map_err(|e| SyncError::Failed(format!("cannot reach the server: {e}")))?;
    let status = response.status();
    if status.is_success() {
        return response
            .json()
            .await
            .map_err(|e| SyncError::Failed(format!("unreadable answer: {e}")));
    }
    let body = response.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(SyncError::Refused(body));
    }
    Err(SyncError::Failed(format!(
        "server answered {status}: {body}"
    )))
}

/// Reconnects back off exponentially from 1 s with jitter (up to twice each delay), so a hundred
/// agents do not stampede a restarted server — but never longer than a quarter of the server's
/// down deadline, so a server back within it finds its nodes before it would declare them down.
fn reconnect_backoff(down_after_s: i64) -> impl Iterator<Item = Duration> {
    let longest = if down_after_s > 0 {
        (down_after_s / 8).clamp(1, 15)
    } else {
        5
    };
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(longest as u64))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Runs the health checks every `interval_s` after the first (`first`), publishing each result.
fn spawn_health_checks(
    checks: HealthChecks,
    interval_s: u64,
    first: Result<(), String>,
) -> watch::Receiver<Result<(), String>> {
    let (tx, rx) = watch::channel(first);
    if checks.nvidia_gpus.is_none() && checks.command.is_none() {
        return rx;
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(interval_s.max(1))).await;
            let result = checks.run().await;
            if tx.send(result).is_err() {
                return;
            }
        }
    });
    rx
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
