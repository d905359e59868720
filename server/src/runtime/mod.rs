//! The embedded scheduler runtime: one task that wakes on every event and on a safety tick, feeds
//! the engine a snapshot and applies its decisions in one transaction.

pub mod active;
pub mod apply;
pub mod config;
mod decision_loop;
pub mod lease;
pub mod ledger;
pub mod queue_cache;
pub mod reasons;
pub mod repo;
pub mod snapshot;

pub use decision_loop::Scheduler;

use crate::{clock::Clock, nodes::repo as node_repo, ServerError};
use config::RuntimeConfig;
use sqlx::AnyPool;
use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};
use tokio::sync::{watch, Notify};

/// A handle to the runtime: cheap to clone, shared by handlers that need to wake it.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    /// The time the runtime decides at and the services built on it read.
    clock: Clock,
    /// Live settings: the Settings page changes them without a restart.
    config: RwLock<RuntimeConfig>,
    wake: Notify,
    /// Bumped whenever the queue or assignments change: pages' event streams follow it, and
    /// agents' held syncs look at [`Marks`] to see whether their own node is concerned.
    assignments: watch::Sender<u64>,
    /// Which nodes' assignments changed at which announcement.
    marks: Mutex<Marks>,
    /// Whether this replica holds the scheduler lease (see [`lease`]).
    standing: lease::Standing,
    queue: queue_cache::QueueCache,
    /// Set when the server begins to stop: event streams and held agent syncs end at once, so a
    /// graceful shutdown does not wait on them.
    stopping: watch::Sender<bool>,
    /// How long the leader's recent passes took, database work included (newest last).
    pass_times: Mutex<VecDeque<PassTiming>>,
    /// How long recent agent syncs took here, their holds not counted (newest last).
    sync_times: Mutex<VecDeque<SyncTiming>>,
    /// An activity rollup step runs in the background (see [`crate::reports::activity_rollup`]).
    activity_rolling: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Where its last step left the rollup: passes start none while nothing is due.
    activity_upto: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// The leader's copy of the queued and running workloads (see [`active`]).
    active: tokio::sync::Mutex<Option<active::Copy>>,
    /// Workloads changed since the copy was brought up to date.
    changed: Mutex<active::Changed>,
    /// Writes to workloads under way (see [`Runtime::writing_workloads`]).
    writes: active::Writes,
    /// A page was served a result built before changes it came after: pages are told to look
    /// again shortly (see [`Runtime::served_behind`]).
    pages_behind: std::sync::atomic::AtomicBool,
    /// The snapshot the leader's latest pass decided on: pages on the leader read it, or build
    /// on it, instead of reading their own (see [`Runtime::page_source`]).
    latest: watch::Sender<Option<PassSnapshot>>,
    /// What `/metrics` counts: requests, passes, preemptions.
    metrics: crate::metrics::Metrics,
    heartbeats: crate::nodes::heartbeats::Heartbeats,
    /// The leader's tree, clusters and nodes, kept between passes (see [`Runtime::kept_shape`]).
    shape: Mutex<Option<KeptShape>>,
    /// The ledger's final hours, kept between passes (see [`Runtime::kept_closed`]).
    closed: Mutex<Option<KeptClosed>>,
}

/// The snapshot a pass decided on, with the queue's generation and shape when it began reading.
struct PassSnapshot {
    generation: u64,
    shape: u64,
    read_at: std::time::Instant,
    snapshot: Arc<Option<snapshot::Snapshots>>,
}

/// What a page's snapshot is made of on this replica (see [`Runtime::page_source`]).
pub enum PageSource {
    /// The latest pass's snapshot: nothing changed since that pass read it.
    Latest(Arc<Option<snapshot::Snapshots>>),
    /// Only workloads changed since the latest pass read (submissions, cancels, ends, its own
    /// decisions): its tree, nodes and ledger, with the leader's copy of the queue brought up to
    /// date (see [`Runtime::snapshot_on`]).
    Base(snapshot::Bases),
    /// Everything read from the database: on a follower, before the first pass, or when the
    /// tree, the nodes or the settings changed since.
    Read,
}

/// The announcement (a value of `assignments`) at which each node's runs last changed, and the
/// last one that concerned every node. A held agent sync re-reads its node's runs only when its
/// node is marked after what it last saw, so a submission or a change on another node costs it
/// nothing (with a thousand agents, one query each per change adds up).
#[derive(Default)]
struct Marks {
    all: u64,
    nodes: HashMap<i64, u64>,
}

/// How many pass durations [`Runtime::pass_durations`] keeps.
const PASS_TIMES_KEPT: usize = 100_000;

/// A pass taking longer than this is logged.
const SLOW_PASS: Duration = Duration::from_secs(1);

/// The longest the leader decides on a tree, clusters and nodes read by an earlier pass.
const SHAPE_READ_EVERY: Duration = Duration::from_secs(2);

/// See [`Runtime::kept_closed`].
struct KeptClosed {
    hours: Arc<snapshot::ClosedHours>,
    epoch: i64,
    read_at: std::time::Instant,
}

/// See [`Runtime::kept_shape`].
struct KeptShape {
    shape: Arc<snapshot::Shape>,
    /// The queue's shape generation when it was read.
    generation: u64,
    /// The lease epoch it was read under.
    epoch: i64,
    read_at: std::time::Instant,
}

/// Fault injection for tests (`HOURGLASS_FAULT_PAUSE_BEFORE_COMMIT_MS`): a pass that changes the
/// cluster waits this long before committing, so a test can kill the process mid-decision.
fn fault_pause_before_commit() -> Option<Duration> {
    static PAUSE: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *PAUSE.get_or_init(|| {
        std::env::var("HOURGLASS_FAULT_PAUSE_BEFORE_COMMIT_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis)
    })
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy)]
pub struct PassOutcome {
    pub started: usize,
    pub stopped: usize,
    pub next_wake: Option<i64>,
    pub timing: PassTiming,
}

/// Where one pass spent its time, each phase summed over the pass's settle rounds. On SQLite
/// everything after `lock` holds the only write lock.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct PassTiming {
    /// Waiting to begin the write transaction.
    pub lock: Duration,
    /// The lease, silent nodes, the ledger, roll-ups and due budget changes.
    pub prepare: Duration,
    /// Reading the snapshot the engine decides on.
    pub load: Duration,
    /// The engine's decision.
    pub decide: Duration,
    /// Writing the decision's starts and stops.
    pub apply: Duration,
    pub commit: Duration,
}

impl PassTiming {
    pub fn total(&self) -> Duration {
        self.lock + self.prepare + self.load + self.decide + self.apply + self.commit
    }
}

/// Where one agent sync spent its time in the server, its hold for work not counted.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct SyncTiming {
    /// Finding the node by its token.
    pub auth: Duration,
    /// The heartbeat and the report: health, output, samples, ended runs.
    pub report: Duration,
    /// Reading the node's runs for the plan (again after each wake-up that concerns it).
    pub plan: Duration,
    /// Waiting for the write lock to number an answer that hands out runs.
    pub answer_lock: Duration,
    /// Numbering that answer, and reading what output was received.
    pub answer: Duration,
}

impl SyncTiming {
    pub fn total(&self) -> Duration {
        self.auth + self.report + self.plan + self.answer_lock + self.answer
    }
}

/// The timings kept in `times`, oldest first.
fn kept<T: Copy>(times: &Mutex<VecDeque<T>>) -> Vec<T> {
    let times = times
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    times.iter().copied().collect()
}

/// Keeps `took`, dropping the oldest beyond the last [`PASS_TIMES_KEPT`].
fn keep<T>(times: &Mutex<VecDeque<T>>, took: T) {
    let mut times = times
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if times.len() == PASS_TIMES_KEPT {
        times.pop_front();
    }
    times.push_back(took);
}

/// Measures phases: each call returns the time since the previous one.
struct Lap(std::time::Instant);

impl Lap {
    fn start() -> Lap {
        Lap(std::time::Instant::now())
    }

    fn lap(&mut self) -> Duration {
        let now = std::time::Instant::now();
        let took = now - self.0;
        self.0 = now;
        took
    }
}

impl Runtime {
    pub fn new(pool: AnyPool, config: RuntimeConfig) -> Runtime {
        Runtime::with_clock(pool, config, Clock::system())
    }

    /// A runtime on `clock` (tests fix it to decide at chosen moments).
    pub fn with_clock(pool: AnyPool, config: RuntimeConfig, clock: Clock) -> Runtime {
        let (assignments, _) = watch::channel(0);
        let (stopping, _) = watch::channel(false);
        Runtime {
            inner: Arc::new(Inner {
                pool,
                clock,
                config: RwLock::new(config),
                wake: Notify::new(),
                assignments,
                marks: Mutex::new(Marks::default()),
                standing: lease::Standing::default(),
                queue: queue_cache::QueueCache::default(),
                stopping,
                pass_times: Mutex::new(VecDeque::new()),
                sync_times: Mutex::new(VecDeque::new()),
                activity_rolling: Default::default(),
                activity_upto: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
                active: tokio::sync::Mutex::new(None),
                changed: Mutex::new(active::Changed::default()),
                writes: active::Writes::default(),
                pages_behind: std::sync::atomic::AtomicBool::new(false),
                latest: watch::channel(None).0,
                metrics: crate::metrics::Metrics::default(),
                heartbeats: Default::default(),
                shape: Mutex::new(None),
                closed: Mutex::new(None),
            }),
        }
    }

    /// The runtime's clock: what every service acting through it takes as "now".
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// Epoch seconds on the runtime's clock.
    pub fn now(&self) -> i64 {
        self.inner.clock.now()
    }

    /// The leader's most recent passes (the last 100,000), oldest first, phase by phase: each
    /// from asking for the write lock to committing.
    pub fn pass_timings(&self) -> Vec<PassTiming> {
        kept(&self.inner.pass_times)
    }

    /// The most recent agent syncs served here (the last 100,000), oldest first, phase by phase.
    pub fn sync_timings(&self) -> Vec<SyncTiming> {
        kept(&self.inner.sync_times)
    }

    pub fn record_sync(&self, took: SyncTiming) {
        keep(&self.inner.sync_times, took);
    }

    /// Agents' heartbeats noted on this replica for a batch (see [`crate::nodes::heartbeats`]).
    pub fn heartbeats(&self) -> &crate::nodes::heartbeats::Heartbeats {
        &self.inner.heartbeats
    }

    /// What this server counts for `/metrics`.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    fn record_pass(&self, took: PassTiming) {
        self.inner.metrics.pass(took.total().as_secs_f64());
        keep(&self.inner.pass_times, took);
    }

    /// The settings in force now.
    pub fn config(&self) -> RuntimeConfig {
        *self
            .inner
            .config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies new settings from the next decision on.
    pub fn set_config(&self, config: RuntimeConfig) {
        *self
            .inner
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = config;
        self.wake();
    }

    /// Asks for a decision soon after anything changed (a share, a node's health, the settings…).
    /// On a follower replica the wake-up is forwarded to the leader through the database.
    pub fn wake(&self) {
        self.inner.queue.reshape();
        self.notify();
    }

    /// As [`Runtime::wake`], after a change to workloads alone (a submission, a cancel, a run
    /// that ended): pages may still build on the latest pass's tree, nodes and ledger.
    pub fn wake_for_workloads(&self) {
        self.inner.queue.invalidate();
        self.notify();
    }

    fn notify(&self) {
        self.inner.wake.notify_one();
        if !self.is_leader() && self.inner.standing.begin_wake() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let runtime = self.clone();
                handle.spawn(async move {
                    if let Err(error) = lease::bump_wake(&runtime.inner.pool).await {
                        tracing::warn!(%error, "could not forward a wake-up to the leader");
                    }
                    runtime.inner.standing.end_wake();
                });
            } else {
                self.inner.standing.end_wake();
            }
        }
    }

    /// Notes that these workloads or their runs changed (call after the change is committed), so
    /// the leader's copy re-reads them. Callers also [`Runtime::wake`] when a decision is due.
    pub fn workloads_changed(&self, ids: impl IntoIterator<Item = i64>) {
        self.changed().add(ids);
    }

    /// Call before a write to workloads begins; name what it changed through the guard once
    /// committed (see [`active::Writes`]).
    pub fn writing_workloads(&self) -> WorkloadWrite<'_> {
        self.inner.writes.begin();
        WorkloadWrite { runtime: self }
    }

    /// Something changed that cannot be named: the next read of the workloads is whole.
    pub fn workloads_changed_unknown(&self) {
        self.changed().unknown();
    }

    fn changed(&self) -> std::sync::MutexGuard<'_, active::Changed> {
        self.inner
            .changed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The queued and running workloads as of now: on the leader from its copy, brought up to date
    /// (see [`active`]); on a follower, which is not told of the leader's decisions, read whole.
    pub async fn active_workloads(
        &self,
        db: &mut sqlx::AnyConnection,
    ) -> Result<Arc<snapshot::Active>, ServerError> {
        self.active_checked(db, true).await
    }

    /// As [`Runtime::active_workloads`]; `may_check`: whether the copy may be compared with the
    /// database when that is due (see [`active::bring_up_to_date`]).
    async fn active_checked(
        &self,
        db: &mut sqlx::AnyConnection,
        may_check: bool,
    ) -> Result<Arc<snapshot::Active>, ServerError> {
        if !self.is_leader() {
            return Ok(Arc::new(snapshot::Active::read_all(db).await?));
        }
        let mut copy = self.inner.active.lock().await;
        let quiet = self.inner.writes.quiet().filter(|_| may_check);
        let changed = std::mem::take(&mut *self.changed());
        // A change clones the copy while the latest pass's snapshot (or a page's) still holds it.
        active::bring_up_to_date(
            &mut copy,
            changed,
            self.inner.standing.epoch(),
            quiet,
            &self.inner.writes,
            db,
        )
        .await
    }

    /// What a page that arrived at queue generation `since` makes its snapshot of. On the leader:
    /// its latest pass's snapshot when that pass began reading at `since` or later (what the
    /// pages show is then what the scheduler decided on); else, when only workloads changed since
    /// and that pass read less than [`queue_cache::MAX_AGE`] ago, that pass's tree, nodes and
    /// ledger under the leader's copy of the queue, brought up to date — with submissions every
    /// few milliseconds nothing is ever unchanged, and reading 50,000 queued workloads for a page
    /// took a second. Otherwise the page reads everything (never waking the scheduler: passes, and
    /// their write transactions, would follow every look at a page).
    pub fn page_source(&self, since: u64) -> PageSource {
        if !self.is_leader() {
            return PageSource::Read;
        }
        let latest = self.inner.latest.borrow();
        match &*latest {
            Some(p) if p.generation >= since => PageSource::Latest(p.snapshot.clone()),
            Some(p)
                if p.shape == self.inner.queue.shape()
                    && p.read_at.elapsed() < queue_cache::MAX_AGE =>
            {
                match p.snapshot.as_ref() {
                    Some(s) => PageSource::Base(s.bases()),
                    None => PageSource::Read,
                }
            }
            _ => PageSource::Read,
        }
    }

    /// The tree, clusters and nodes a pass decides on (see [`snapshot::Shape`]): the leader keeps
    /// them between passes and reads them again when `shape` (the queue's shape generation as the
    /// round began) moved on — a share, a node's health, the settings changed here, a silent node
    /// was marked down, a scheduled change applied, or another replica forwarded a wake-up — when
    /// the lease changed hands, and at least every [`SHAPE_READ_EVERY`] for what changes without
    /// a word (an import from the command line). At 50,000 queued with 200 readers, reading them
    /// was most of a pass's reading (24 ms at the median). `None` until a budget tree exists.
    async fn kept_shape(
        &self,
        db: &mut sqlx::AnyConnection,
        shape: u64,
    ) -> Result<Option<Arc<snapshot::Shape>>, ServerError> {
        let epoch = self.inner.standing.epoch();
        let fresh = |k: &&KeptShape| {
            k.generation == shape && k.epoch == epoch && k.read_at.elapsed() < SHAPE_READ_EVERY
        };
        if let Some(kept) = self.kept().as_ref().filter(fresh) {
            return Ok(Some(kept.shape.clone()));
        }
        let read_at = std::time::Instant::now();
        let Some(read) = snapshot::load_shape(db).await?.map(Arc::new) else {
            *self.kept() = None;
            return Ok(None);
        };
        *self.kept() = Some(KeptShape {
            shape: read.clone(),
            generation: shape,
            epoch,
            read_at,
        });
        Ok(Some(read))
    }

    /// The ledger's final hours (see [`snapshot::ClosedHours`]): the leader keeps them between
    /// passes and reads only the hours that closed since, all of them again when the window moved
    /// on an hour, the lease changed hands, or [`active::FULL_READ_EVERY`] after the last whole
    /// read. Only this leader's passes book charges, up to the moment of the pass, so an hour
    /// before the one before `now` is never booked again while it holds the lease.
    async fn kept_closed(
        &self,
        db: &mut sqlx::AnyConnection,
        config: &RuntimeConfig,
        now: i64,
    ) -> Result<Arc<snapshot::ClosedHours>, ServerError> {
        let (first, until) = (snapshot::first_hour(config, now), snapshot::open_from(now));
        let epoch = self.inner.standing.epoch();
        let kept = self.closed().take().filter(|k| {
            k.epoch == epoch
                && k.hours.first_hour == first
                && k.hours.until <= until
                && k.read_at.elapsed() < active::FULL_READ_EVERY
        });
        let kept = match kept {
            Some(mut k) => {
                if k.hours.until < until {
                    Arc::make_mut(&mut k.hours).extend(db, until).await?;
                }
                k
            }
            None => KeptClosed {
                hours: Arc::new(snapshot::ClosedHours::read(db, first, until).await?),
                epoch,
                read_at: std::time::Instant::now(),
            },
        };
        let hours = kept.hours.clone();
        *self.closed() = Some(kept);
        Ok(hours)
    }

    fn closed(&self) -> std::sync::MutexGuard<'_, Option<KeptClosed>> {
        self.inner
            .closed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<KeptShape>> {
        self.inner
            .shape
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The queued and running workloads as of now (see [`Runtime::active_workloads`]) on `base`.
    pub async fn snapshot_on(
        &self,
        db: &mut sqlx::AnyConnection,
        bases: snapshot::Bases,
    ) -> Result<snapshot::Snapshots, ServerError> {
        let active = self.active_checked(db, false).await?;
        Ok(snapshot::assemble_all(&bases, active, self.now()))
    }

    /// How many workloads were queued and running when the leader's latest pass read (`None` on a
    /// follower or before the first pass).
    pub fn active_workloads_seen(&self) -> Option<usize> {
        let latest = self.inner.latest.borrow();
        let snapshot = latest.as_ref()?.snapshot.as_ref().as_ref()?;
        Some(snapshot.active_len())
    }

    /// Whether this replica holds the scheduler lease and so runs the decisions.
    pub fn is_leader(&self) -> bool {
        self.inner.standing.is_leader()
    }

    /// Gives up the scheduler lease (at shutdown) so another replica takes over at once.
    pub async fn release(&self) -> Result<(), ServerError> {
        lease::release(&self.inner.pool, &self.inner.standing).await
    }

    /// The server is stopping: long-lived responses end.
    pub fn begin_stopping(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Resolves once the server begins to stop.
    pub async fn stopped(&self) {
        let mut stopping = self.inner.stopping.subscribe();
        let _ = stopping.wait_for(|&stop| stop).await;
    }

    pub fn assignments(&self) -> watch::Receiver<u64> {
        self.inner.assignments.subscribe()
    }

    /// The Queue page's shared list.
    pub fn queue_cache(&self) -> &queue_cache::QueueCache {
        &self.inner.queue
    }

    /// A page was served a result from before changes it came after ([`queue_cache::COALESCE`]):
    /// once such results may have been rebuilt, pages are told to look again (their event stream
    /// follows the announcements), so none is left showing what it missed. One reminder at a
    /// time, however many pages were served behind.
    pub fn served_behind(&self) {
        use std::sync::atomic::Ordering;
        if self.inner.pages_behind.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.inner.pages_behind.store(false, Ordering::Release);
            return;
        };
        let runtime = self.clone();
        handle.spawn(async move {
            tokio::time::sleep(queue_cache::COALESCE).await;
            runtime.inner.pages_behind.store(false, Ordering::Release);
            // Not a change: the queue's generation stays, so the pages' next look rebuilds only
            // what is older than the changes they missed. No node is marked: held agent syncs
            // stay held.
            runtime.inner.assignments.send_modify(|v| *v += 1);
        });
    }

    /// Tells pages that the queue changed (a submission, a health change): no node's runs did.
    pub fn announce(&self) {
        self.bump(|_, _| {});
    }

    /// Tells pages, and the held syncs of these nodes' agents, that runs on them started or ended.
    pub fn announce_nodes(&self, nodes: impl IntoIterator<Item = i64>) {
        self.bump(|marks, at| {
            for node in nodes {
                marks.nodes.insert(node, at);
            }
        });
    }

    /// As [`Runtime::announce_nodes`], for every node: when which ones changed is not known here
    /// (another replica's decision).
    pub fn announce_all_nodes(&self) {
        self.bump(|marks, at| marks.all = at);
    }

    /// A new announcement, its marks set before anyone waiting on it wakes.
    fn bump(&self, mark: impl FnOnce(&mut Marks, u64)) {
        self.inner.queue.invalidate();
        self.inner.assignments.send_modify(|v| {
            *v += 1;
            mark(&mut self.marks(), *v);
        });
    }

    /// Whether the runs on `node` changed after announcement `seen` (a value read from
    /// [`Runtime::assignments`] before the node's runs were last read).
    pub fn node_changed_since(&self, node: i64, seen: u64) -> bool {
        let marks = self.marks();
        marks.all > seen || marks.nodes.get(&node).is_some_and(|&at| at > seen)
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.inner
            .marks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The leader's retention (`workloads::retention`): a bounded step each minute while old
    /// output or events are due, every ten minutes once caught up. Followers only wait.
    async fn keep_history(self) {
        // Not in the first moments of a (re)start: the lease and the first passes come first.
        tokio::time::sleep(Duration::from_secs(30)).await;
        loop {
            let mut pause = Duration::from_secs(600);
            if self.is_leader() {
                let retention = self.config().retention;
                match crate::workloads::retention::prune_step(
                    &self.inner.pool,
                    &retention,
                    self.now(),
                )
                .await
                {
                    Ok(pruned) => {
                        if pruned.outputs + pruned.events > 0 {
                            tracing::info!(
                                outputs = pruned.outputs,
                                events = pruned.events,
                                "retention: old output and events removed"
                            );
                        }
                        if !pruned.caught_up {
                            pause = Duration::from_secs(60);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "retention step failed"),
                }
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Renews (or claims) the scheduler lease in a write transaction of its own.
    async fn renew(&self) -> Result<bool, ServerError> {
        let mut tx = crate::db::begin_write(&self.inner.pool).await?;
        let held = lease::claim(&mut tx, &self.inner.standing).await?;
        tx.commit().await?;
        Ok(held)
    }

    /// One decision at `now`: mark silent nodes down, book usage and due budget changes (one short
    /// write transaction), then rounds of read, decide, write. The snapshot is read and the engine
    /// decides without the write lock, so agents' heartbeats and submissions are not held up by
    /// them; the decision is written in a transaction of its own, action by action where its
    /// workload still stands as read (see [`apply`]). Work stopped and requeued is offered again at
    /// the same `now`.
    pub async fn pass(&self, now: i64) -> Result<PassOutcome, ServerError> {
        let config = &self.config();
        let mut timing = PassTiming::default();
        let mut lap = Lap::start();
        let mut tx = crate::db::begin_write(&self.inner.pool).await?;
        timing.lock = lap.lap();
        if !lease::claim(&mut tx, &self.inner.standing).await? {
            // Another replica decides; nothing here may change the cluster.
            tx.rollback().await?;
            return Ok(PassOutcome::default());
        }
        // Heartbeats noted on this replica are written first: none of their nodes is silent.
        let beats = self.inner.heartbeats.pending();
        node_repo::write_heartbeats(&mut tx, &beats).await?;
        let silent =
            node_repo::mark_silent_nodes_down(&mut *tx, now - config.heartbeat_deadline, now)
                .await?;
        ledger::accrue_in_pass(&mut tx, now, config.demand_every_s).await?;
        crate::reports::rollup::keep_up(&mut tx, now).await?;
        crate::reports::waits::keep_up(&mut tx, now).await?;
        let reshared = crate::budget::changes::apply_due(&mut tx, now).await?;
        if reshared > 0 {
            tracing::info!(requests = reshared, "scheduled budget changes applied");
        }
        if silent > 0 || reshared > 0 {
            // Read again below, not kept from an earlier pass (see `kept_shape`).
            self.inner.queue.reshape();
        }
        tx.commit().await?;
        self.inner.heartbeats.written(&beats);
        crate::reports::activity_rollup::spawn_step(
            self.inner.pool.clone(),
            now,
            self.inner.activity_upto.clone(),
            self.inner.activity_rolling.clone(),
        );
        timing.prepare = lap.lap();

        let mut outcome = PassOutcome::default();
        let mut stale = 0;
        // Each cluster settles on its own (one engine decision per cluster per round), all in
        // this pass and under this lease.
        let mut settles: BTreeMap<i64, scheduler::Settle> = BTreeMap::new();
        let mut wakes: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        let settling = |settles: &BTreeMap<i64, scheduler::Settle>, cluster: i64| {
            settles.get(&cluster).is_none_or(|s| s.next_pass())
        };
        // The tree, nodes and ledger a round read, with the shape then: later rounds decide on
        // them again while the shape is unchanged (a node's health, a share, the settings).
        let mut bases: Option<(u64, snapshot::Bases)> = None;
        loop {
            let (generation, shape) = (self.inner.queue.generation(), self.inner.queue.shape());
            let read_at = std::time::Instant::now();
            let mut read = crate::db::begin_read(&self.inner.pool).await?;
            let active = self.active_workloads(&mut read).await?;
            let round_bases = match &bases {
                Some((read_in, bases)) if *read_in == shape => {
                    Some(snapshot::lane_again(&mut read, config, now, bases).await?)
                }
                _ => match self.kept_shape(&mut read, shape).await? {
                    Some(kept) => {
                        let closed = self.kept_closed(&mut read, config, now).await?;
                        Some(snapshot::bases_on(&mut read, config, now, &kept, &closed).await?)
                    }
                    None => None,
                },
            };
            read.rollback().await?;
            let loaded = Arc::new(
                round_bases
                    .as_ref()
                    .map(|b| snapshot::assemble_all(b, active, now)),
            );
            bases = round_bases.map(|b| (shape, b));
            self.inner.latest.send_replace(Some(PassSnapshot {
                generation,
                shape,
                read_at,
                snapshot: loaded.clone(),
            }));
            let Some(snapshots) = loaded.as_ref() else {
                break;
            };
            timing.load += lap.lap();
            let mut decisions = Vec::new();
            for snapshot in &snapshots.clusters {
                let cluster = snapshot.cluster.cluster_id;
                if !settling(&settles, cluster) {
                    continue;
                }
                let decision = snapshot
                    .engine
                    .decide(&snapshot.state(), now)
                    .map_err(|e| {
                        ServerError::Config(format!(
                            "the engine refused the snapshot of cluster {}: {e:?}",
                            snapshot.cluster.name
                        ))
                    })?;
                decisions.push((snapshot, decision));
            }
            timing.decide += lap.lap();
            if decisions.is_empty() {
                break;
            }
            for (snapshot, decision) in &decisions {
                wakes.insert(snapshot.cluster.cluster_id, decision.next_wake);
            }
            // The earliest moment any cluster asks to be decided again.
            outcome.next_wake = wakes.values().flatten().copied().min();
            let acting = decisions.iter().any(|(_, d)| !d.actions.is_empty());
            if !acting {
                for (snapshot, decision) in &decisions {
                    settles
                        .entry(snapshot.cluster.cluster_id)
                        .or_default()
                        .applied(decision);
                }
                continue;
            }
            let mut tx = crate::db::begin_write(&self.inner.pool).await?;
            timing.lock += lap.lap();
            if !lease::claim(&mut tx, &self.inner.standing).await? {
                // The lease passed to another replica while this one decided.
                tx.rollback().await?;
                break;
            }
            let writing = Writing {
                runtime: self,
                acted: Some(
                    decisions
                        .iter()
                        .flat_map(|(_, d)| d.actions.iter().map(|a| a.workload().0 as i64))
                        .collect(),
                ),
            };
            let mut applied = apply::Applied::default();
            for (snapshot, decision) in &decisions {
                applied.add(apply::apply(&mut tx, snapshot, decision, now).await?);
            }
            if applied.started + applied.stopped > 0 {
                lease::bump_assign(&mut tx).await?;
                if let Some(pause) = fault_pause_before_commit() {
                    tracing::warn!(
                        ?pause,
                        "fault injection: pausing before committing a decision"
                    );
                    tokio::time::sleep(pause).await;
                }
            }
            timing.apply += lap.lap();
            tx.commit().await?;
            writing.committed();
            self.inner.metrics.stopped(&applied.rules);
            timing.commit += lap.lap();
            outcome.started += applied.started;
            outcome.stopped += applied.stopped;
            stale += applied.stale;
            if applied.started + applied.stopped > 0 {
                tracing::info!(
                    started = applied.started,
                    stopped = applied.stopped,
                    "scheduler pass"
                );
                self.announce_nodes(applied.nodes);
            }
            for (snapshot, decision) in &decisions {
                settles
                    .entry(snapshot.cluster.cluster_id)
                    .or_default()
                    .applied(decision);
            }
        }
        if stale > 0 {
            // Some workload changed while the engine decided: decide again on what is there now.
            tracing::debug!(stale, "decision partly out of date; deciding again");
            self.wake();
        }
        outcome.timing = timing;
        Ok(outcome)
    }
}

/// A write to workloads under way (see [`Runtime::writing_workloads`]).
pub struct WorkloadWrite<'a> {
    runtime: &'a Runtime,
}

impl WorkloadWrite<'_> {
    /// The write committed: the leader's copy re-reads these workloads.
    pub fn committed(self, ids: impl IntoIterator<Item = i64>) {
        self.runtime.workloads_changed(ids);
    }
}

impl Drop for WorkloadWrite<'_> {
    fn drop(&mut self) {
        self.runtime.inner.writes.end();
    }
}

/// A decision being written: once committed, the leader's copy re-reads the workloads it acted on;
/// dropped before (an error part way), the copy is read whole, since what was written is unknown.
struct Writing<'a> {
    runtime: &'a Runtime,
    acted: Option<Vec<i64>>,
}

impl Writing<'_> {
    fn committed(mut self) {
        if let Some(ids) = self.acted.take() {
            self.runtime.workloads_changed(ids);
        }
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if self.acted.is_some() {
            self.runtime.workloads_changed_unknown();
        }
    }
}
