//! `hourglass loadtest`: the live system at scale, measured end to end. A real server (the router,
//! runtime and database code `serve` runs) on loopback; `--nodes` agents as lightweight tasks
//! speaking the agent protocol over HTTP (simulated GPUs); submissions through the JSON API;
//! signed-in people reading the queue and workload pages. It prints what it measured, then one
//! JSON object on its last line; any failed request makes it exit non-zero.

mod agents;
pub mod history;
pub mod measure;
mod people;
mod seed;

use crate::{
    build_app,
    config::ServeArgs,
    db,
    metrics::PageSnapshot,
    runtime::{PassTiming, Runtime, SyncTiming},
    serve::{leptos_options, runtime_config},
    AppState, ServerError,
};
use clap::Args;
use measure::{CpuUse, Errors, Phase, Report, Samples, Summary, Window};
use people::Dice;
use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Simulated GPU nodes, each with its own agent task.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub gpus_per_node: u32,
    /// Workloads queued before the measured window opens.
    #[arg(long, default_value_t = 2_000)]
    pub queued: u32,
    /// Submissions per second during the window (open loop).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub submit_rate: u32,
    /// Signed-in people reading the queue and workload pages (1–3 s on each page).
    #[arg(long, default_value_t = 200)]
    pub readers: u32,
    /// Teams (leaves of the tree), 15 to a program.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u32).range(2..=10_000))]
    pub leaves: u32,
    /// How long the measured window lasts: `120s`, `2m` or plain seconds.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How long readers and submitters run before the window opens (measured and printed apart:
    /// the readers' arrival, all within 3 s).
    /// `0s` opens the window at once, as runs before the warm-up existed did.
    #[arg(long, default_value = "10s", value_parser = parse_span)]
    pub warmup: Duration,
    /// Days of hourly ledger written before the run, every team busy at its share, as a server
    /// that has run for a while holds (each pass reads the fair-share window of it, 7 days).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(0..=400))]
    pub ledger_days: u32,
}

/// A window's length: more than nothing.
fn parse_duration(text: &str) -> Result<Duration, String> {
    match parse_span(text)? {
        Duration::ZERO => Err(format!(
            "\"{}\" is no time at all; the window needs at least a second",
            text.trim()
        )),
        span => Ok(span),
    }
}

/// Seconds (`120s`, `120`) or minutes (`2m`), zero included.
fn parse_span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.strip_suffix('s') {
        Some(n) => (n, 1),
        None => match text.strip_suffix('m') {
            Some(n) => (n, 60),
            None => (text, 1),
        },
    };
    match number.trim().parse::<u64>() {
        Ok(n) => Ok(Duration::from_secs(n * unit)),
        _ => Err(format!(
            "\"{text}\" is not a duration; write seconds (\"120s\" or \"120\") or minutes (\"2m\")"
        )),
    }
}

/// What the tasks share: the client, the server's address, the window and every measurement.
pub struct Shared {
    pub http: reqwest::Client,
    pub base: String,
    pub window: Window,
    over: AtomicBool,
    pub errors: Errors,
    pub syncs: Samples,
    pub starts: Samples,
    pub submits: Samples,
    pub queue_pages: Samples,
    pub workload_pages: Samples,
    pub last_id: AtomicI64,
    pub submitted: AtomicUsize,
    /// Debug workloads submitted in the window: when submitted, or when started where the agent
    /// heard of it before the submitter heard back.
    debug: Mutex<HashMap<i64, Mark>>,
    debug_started: AtomicUsize,
}

enum Mark {
    Submitted(Instant),
    Started(Instant),
}

impl Shared {
    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// A node was told to start workload `id` named `name`.
    pub fn started(&self, id: i64, name: &str) {
        if !name.starts_with("debug-") {
            return;
        }
        let mut debug = self.debug.lock().unwrap_or_else(|p| p.into_inner());
        match debug.remove(&id) {
            Some(Mark::Submitted(at)) => {
                self.starts.push(Phase::Open, at.elapsed());
                self.debug_started.fetch_add(1, Ordering::Relaxed);
            }
            Some(started) => {
                debug.insert(id, started);
            }
            None => {
                debug.insert(id, Mark::Started(Instant::now()));
            }
        }
    }

    /// Debug workload `id` was submitted at `at` (in the window).
    pub fn debug_submitted(&self, id: i64, at: Instant) {
        let mut debug = self.debug.lock().unwrap_or_else(|p| p.into_inner());
        match debug.remove(&id) {
            Some(Mark::Started(started)) => {
                self.starts
                    .push(Phase::Open, started.saturating_duration_since(at));
                self.debug_started.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                debug.insert(id, Mark::Submitted(at));
            }
        }
    }

    /// Debug workloads still waiting, and how long each has waited so far.
    fn debug_waiting(&self) -> Vec<Duration> {
        let debug = self.debug.lock().unwrap_or_else(|p| p.into_inner());
        debug
            .values()
            .filter_map(|mark| match mark {
                Mark::Submitted(at) => Some(at.elapsed()),
                Mark::Started(_) => None,
            })
            .collect()
    }
}

pub async fn run(database: Option<&str>, args: LoadArgs) -> Result<(), ServerError> {
    let dir = tempfile::tempdir()?;
    let url = match database {
        Some(url) => url.to_string(),
        None => format!("sqlite://{}", dir.path().join("loadtest.db").display()),
    };
    let pool = db::open(&url).await?;
    let people = crate::demo::repo::usernames(&pool).await?.len();
    if people > 0 {
        return Err(ServerError::Config(format!(
            "the load test builds its own organisation and fills the database with it; {} already \
             has people: give it an empty database (or none, for a temporary SQLite file)",
            db::redacted(&url)
        )));
    }
    let gpus = args.nodes * args.gpus_per_node;
    println!(
        "load test: {} nodes × {} GPUs, {} teams, {} queued, {}/s submitted, {} readers, {} s, on {}",
        args.nodes,
        args.gpus_per_node,
        args.leaves,
        args.queued,
        args.submit_rate,
        args.readers,
        args.duration.as_secs(),
        engine_name(&url)
    );
    let teams = seed::organisation(&pool, args.leaves, crate::clock::Clock::system().now()).await?;
    let nodes = seed::nodes(&pool, args.nodes, crate::clock::Clock::system().now()).await?;
    seed::ledger(
        &pool,
        &teams,
        gpus,
        args.ledger_days,
        crate::clock::Clock::system().now(),
    )
    .await?;

    // The server, built as `serve` builds it.
    let serve_args = ServeArgs {
        site_root: dir.path().join("site"),
        ..ServeArgs::default()
    };
    let control_pool = db::connect_control(&url).await?;
    let runtime = Runtime::new(
        control_pool.clone(),
        crate::settings::load(&pool, runtime_config(&serve_args)).await?,
    );
    let state = AppState {
        leptos_options: leptos_options(&serve_args)?,
        pool: pool.clone(),
        control_pool,
        sessions: db::SessionStore::open(&url).await?,
        secure_cookies: false,
        runtime: runtime.clone(),
        lab: crate::lab::Lab::new(None),
        proxy: Default::default(),
        metrics_token: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = build_app(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the load test's server stopped");
        }
    });
    let scheduler = runtime.spawn();
    crate::workloads::estimate::keep_warm(pool.clone(), runtime.clone(), Duration::from_secs(5));
    // The load generator runs on threads of its own, so the server's tasks never wait in a queue
    // behind its agents and readers (they share the cores, as a server shares its machine), and
    // the CPU each side used can be told apart.
    let harness = Harness::start()?;

    crate::agent::client::install_tls_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| ServerError::Config(format!("the load test's HTTP client: {e}")))?;
    let shared = Arc::new(Shared {
        http,
        base,
        window: Window::default(),
        over: AtomicBool::new(false),
        errors: Errors::default(),
        syncs: Samples::default(),
        starts: Samples::default(),
        submits: Samples::default(),
        queue_pages: Samples::default(),
        workload_pages: Samples::default(),
        last_id: AtomicI64::new(0),
        submitted: AtomicUsize::new(0),
        debug: Mutex::new(HashMap::new()),
        debug_started: AtomicUsize::new(0),
    });

    // Every node connects before anything is submitted.
    for (name, token) in nodes {
        harness.spawn(agents::run(name, token, args.gpus_per_node, shared.clone()));
    }
    let connecting = Instant::now();
    loop {
        let (connected, _, _) =
            crate::workloads::repo::connected_capacity(&pool, crate::clusters::DEFAULT_ID).await?;
        if connected == i64::from(args.nodes) {
            break;
        }
        if connecting.elapsed() > Duration::from_secs(120) {
            return Err(ServerError::Config(format!(
                "only {connected} of {} nodes connected within 2 minutes",
                args.nodes
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "{} nodes connected in {:.1} s",
        args.nodes,
        connecting.elapsed().as_secs_f64()
    );

    // The initial queue, 32 submissions in flight.
    let trainers: Vec<seed::Team> = teams.iter().filter(|t| !t.debug).cloned().collect();
    let debuggers: Vec<seed::Team> = teams.iter().filter(|t| t.debug).cloned().collect();
    let mut dice = Dice::new(0x2545_f491_4f6c_dd1d);
    let seeding = Instant::now();
    let mut batch = Vec::new();
    for i in 0..u64::from(args.queued) {
        let team = &trainers[dice.roll(trainers.len() as u64) as usize];
        let body = people::training(team, i, &mut dice);
        batch.push(harness.spawn(people::submit(shared.clone(), team.clone(), body)));
        if batch.len() == 32 {
            for task in batch.drain(..) {
                let _ = task.await;
            }
        }
        if (i + 1) % 5_000 == 0 {
            println!("  queued {} of {}", i + 1, args.queued);
        }
    }
    for task in batch.drain(..) {
        let _ = task.await;
    }
    println!(
        "queued {} workloads through the API in {:.1} s",
        args.queued,
        seeding.elapsed().as_secs_f64()
    );

    // Readers sign in and start reading, submissions start, and after the warm-up the window
    // opens.
    let persons: Vec<String> = (0..args.readers as usize)
        .map(|r| teams[r % teams.len()].person.clone())
        .collect();
    let signing = harness.spawn({
        let shared = shared.clone();
        async move {
            let mut cookies = Vec::new();
            for person in persons {
                match people::sign_in(&shared, &person, seed::PASSWORD).await {
                    Ok(cookie) => cookies.push(cookie),
                    Err(error) => shared.errors.record(error),
                }
            }
            cookies
        }
    });
    let cookies = signing
        .await
        .map_err(|e| ServerError::Config(format!("the load test's sign-ins stopped: {e}")))?;
    shared.window.warm_up();
    let warming = Instant::now();
    for (r, cookie) in cookies.into_iter().enumerate() {
        harness.spawn(people::read(shared.clone(), cookie, r as u64 + 1));
    }
    // Debug teams submit at half the rate their shares could sustain, so every debug workload fits.
    let debug_share: f64 = debuggers.iter().map(|t| t.fraction).sum();
    let debug_rate = (0.5 * debug_share * f64::from(gpus) / people::DEBUG_GPU_S)
        .min(f64::from(args.submit_rate) / 2.0);
    let debug_per_million = (debug_rate / f64::from(args.submit_rate) * 1e6) as u64;
    let mut tick =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.submit_rate)));
    let mut i = u64::from(args.queued);
    let mut opened = None;
    let built = |source| runtime.metrics().page_snapshots(source);
    loop {
        tick.tick().await;
        if opened.is_none() && warming.elapsed() >= args.warmup {
            opened = Some((
                Instant::now(),
                runtime.pass_timings().len(),
                runtime.sync_timings().len(),
                [built(PageSnapshot::Base), built(PageSnapshot::Read)],
                CpuUse::now(),
            ));
            shared.window.open();
        }
        if opened.is_some_and(|(window, ..)| window.elapsed() >= args.duration) {
            break;
        }
        i += 1;
        let (team, body) = if !debuggers.is_empty() && dice.roll(1_000_000) < debug_per_million {
            let team = &debuggers[dice.roll(debuggers.len() as u64) as usize];
            (team, people::debug(team, i, &mut dice))
        } else {
            let team = &trainers[dice.roll(trainers.len() as u64) as usize];
            (team, people::training(team, i, &mut dice))
        };
        harness.spawn(people::submit(shared.clone(), team.clone(), body));
    }
    let (window, passes_before, syncs_before, built_before, cpu_before) =
        opened.expect("the loop ends only after the window opened");
    shared.window.close();
    let cpu = CpuUse::now().cores_since(&cpu_before, window.elapsed());
    shared.over.store(true, Ordering::Release);
    let elapsed = window.elapsed();
    // The measurement is over: no pass may start while the run winds down and its pool closes.
    scheduler.stop().await;

    let all_passes = runtime.pass_timings();
    let window_passes = &all_passes[passes_before.min(all_passes.len())..];
    let phase =
        |of: fn(&PassTiming) -> Duration| Summary::of(window_passes.iter().map(of).collect());
    let passes = phase(PassTiming::total);
    let phases = [
        ("  waiting for the write lock", phase(|t| t.lock)),
        ("  lease, ledger, due changes", phase(|t| t.prepare)),
        ("  loading the snapshot", phase(|t| t.load)),
        ("  the engine's decision", phase(|t| t.decide)),
        ("  writing starts and stops", phase(|t| t.apply)),
        ("  commit", phase(|t| t.commit)),
    ];
    let all_syncs = runtime.sync_timings();
    let window_syncs = &all_syncs[syncs_before.min(all_syncs.len())..];
    let sync_phase =
        |of: fn(&SyncTiming) -> Duration| Summary::of(window_syncs.iter().map(of).collect());
    let sync_phases = [
        ("  in the server", sync_phase(SyncTiming::total)),
        ("  finding the node by its token", sync_phase(|t| t.auth)),
        ("  heartbeat and report", sync_phase(|t| t.report)),
        ("  reading its runs for the plan", sync_phase(|t| t.plan)),
        (
            "  waiting to number an answer",
            sync_phase(|t| t.answer_lock),
        ),
        ("  the answer", sync_phase(|t| t.answer)),
    ];
    // A debug workload still waiting counts with the time it has waited so far.
    let starts = shared.starts.summary_with(shared.debug_waiting());
    let waiting = shared.debug_waiting().len();
    let syncs = shared.syncs.summary();
    let queue_pages = shared.queue_pages.summary();
    let workload_pages = shared.workload_pages.summary();
    let page_kinds = [&shared.queue_pages, &shared.workload_pages];
    let pages = Samples::merged(&page_kinds, Phase::Open);
    let submits = shared.submits.summary();
    let states = crate::workloads::repo::count_by_state(&pool).await?;
    let count = |state: &str| {
        states
            .iter()
            .find(|(s, _)| s == state)
            .map(|(_, n)| *n)
            .unwrap_or(0)
    };
    println!(
        "\n{:<34} {:>8} {:>9} {:>9} {:>9}",
        "measured", "count", "p50 ms", "p99 ms", "max ms"
    );
    let phase_rows = phases.iter().map(|(what, s)| (*what, *s));
    for (what, s) in [("scheduler pass (with database)", passes)]
        .into_iter()
        .chain(phase_rows)
        .chain([("agent sync (reporting)", syncs)])
        .chain(sync_phases)
        .chain([
            ("debug submit → start", starts),
            ("queue page", queue_pages),
            ("workload page", workload_pages),
            ("submission (JSON API)", submits),
        ])
    {
        println!(
            "{what:<34} {:>8} {:>9.1} {:>9.1} {:>9.1}",
            s.count, s.p50_ms, s.p99_ms, s.max_ms
        );
    }
    let built_on_base = built(PageSnapshot::Base) - built_before[0];
    let read_whole = built(PageSnapshot::Read) - built_before[1];
    println!(
        "snapshots built for pages: {built_on_base} on the latest pass's base, {read_whole} read whole"
    );
    let warm = |kinds: &[&Samples]| Samples::merged(kinds, Phase::Warmup);
    let (warm_pages, warm_syncs) = (warm(&page_kinds), warm(&[&shared.syncs]));
    println!(
        "warm-up ({} s before the window, not in its figures): pages p50 / p99 {:.1} / {:.1} ms \
         ({}), agent syncs {:.1} / {:.1} ms ({})",
        args.warmup.as_secs(),
        warm_pages.p50_ms,
        warm_pages.p99_ms,
        warm_pages.count,
        warm_syncs.p50_ms,
        warm_syncs.p99_ms,
        warm_syncs.count
    );
    println!(
        "CPU in the window: the server {:.2} cores, the load generator {:.2} (of {})",
        cpu.0,
        cpu.1,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let errors = shared.errors.count();
    for error in shared.errors.first() {
        println!("error: {error}");
    }
    let report = Report {
        pass_p50_ms: passes.p50_ms,
        pass_p99_ms: passes.p99_ms,
        pass_lock_p99_ms: phases[0].1.p99_ms,
        pass_load_p99_ms: phases[2].1.p99_ms,
        pass_decide_p99_ms: phases[3].1.p99_ms,
        pass_apply_p99_ms: phases[4].1.p99_ms,
        sync_p99_ms: syncs.p99_ms,
        start_p99_ms: starts.p99_ms,
        page_p99_ms: pages.p99_ms,
        queue_page_p99_ms: queue_pages.p99_ms,
        workload_page_p99_ms: workload_pages.p99_ms,
        submit_p99_ms: submits.p99_ms,
        server_rss_mb: measure::peak_rss_mb(),
        server_cpu_cores: cpu.0,
        harness_cpu_cores: cpu.1,
        errors,
        passes: passes.count,
        syncs: syncs.count,
        debug_started: shared.debug_started.load(Ordering::Relaxed),
        debug_not_started: waiting,
        pages: pages.count,
        page_snapshots_on_base: built_on_base,
        page_snapshots_read_whole: read_whole,
        submitted: shared.submitted.load(Ordering::Relaxed),
        nodes: args.nodes,
        gpus,
        queued_at_end: count("queued"),
        running_at_end: count("running"),
        database: engine_name(&url),
        duration_s: elapsed.as_secs(),
    };
    println!(
        "{}",
        serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    );
    if errors > 0 {
        return Err(ServerError::Config(format!(
            "the load test saw {errors} failed requests (the first are listed above)"
        )));
    }
    Ok(())
}

/// The load generator's runtime ([`measure::HARNESS_THREADS`]), shut down without waiting when
/// the run ends, however it ends (a runtime may not be dropped from within async code).
struct Harness(Option<tokio::runtime::Runtime>);

impl Harness {
    fn start() -> Result<Harness, ServerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(measure::HARNESS_THREADS)
            .enable_all()
            .build()?;
        Ok(Harness(Some(runtime)))
    }

    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0
            .as_ref()
            .expect("the runtime is there until dropped")
            .spawn(task)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

pub(crate) fn engine_name(url: &str) -> &'static str {
    if url.starts_with("postgres") {
        "PostgreSQL"
    } else {
        "SQLite"
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_span};
    use std::time::Duration;

    #[test]
    fn durations_are_read_in_seconds_or_minutes_and_nonsense_is_named() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\""));
        assert!(parse_duration("0s").unwrap_err().contains("no time at all"));
        assert_eq!(parse_span("0s"), Ok(Duration::ZERO), "no warm-up");
    }
}
