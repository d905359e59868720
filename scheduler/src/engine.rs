//! The engine: configuration, the budget tree and the ledger, and the two questions drivers ask.

use crate::baseline_book::BaselineBook;
use crate::explain::{self, Explanation};
use crate::ids::{BudgetId, Time, WorkloadId};
use crate::ledger::{Ledger, LedgerConfig};
use crate::lineup::Lineup;
use crate::pool::{Build, Kept, Pool, Run};
use crate::ranking::{Recent, Standings};
use crate::reasons::Decision;
use crate::slurm::{self, SlurmConfig};
use crate::snapshot::{Changes, ClusterState, SnapshotError, WorkloadSpec};
use crate::tree::{BudgetTree, TreeError};
use crate::{decide, priority};

use std::sync::{Mutex, MutexGuard};

/// Which scheduler decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Hierarchical fair share with minimum-runtime protection (DESIGN §4).
    #[default]
    FairShare,
    /// The pre-budget baseline: global priority then age, protected GPUs capped per leaf.
    Priority,
    /// The SLURM peer: multifactor priority with Fair Tree, scavenger preemption, EASY backfill
    /// ([`crate::SlurmConfig`]).
    Slurm,
}

impl Policy {
    /// The policy's name in reports, files and flags.
    pub fn name(self) -> &'static str {
        match self {
            Policy::FairShare => "fair-share",
            Policy::Priority => "priority",
            Policy::Slurm => "slurm",
        }
    }
}

/// Engine settings. `Config::default()` is the documented production default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub policy: Policy,
    /// Lookback window and bucket width.
    pub ledger: LedgerConfig,
    /// Damping (DESIGN §4.6): a waiting workload preempts unprotected work only if, where their
    /// paths part, the running side's ratio exceeds the waiting side's by more than this. With
    /// ratios of usage to a week's allocation, 0.02 is about 3.4 hours of the leaf's full funded
    /// rate: two equally funded, equally busy leaves hand GPUs back and forth at most that often.
    /// 0 disables damping.
    pub damping_margin: f64,
    /// Damping for kills: unprotected work that cannot resume loses all its progress when
    /// preempted, so fair share (and the fast lane) takes it only where the running side's ratio
    /// exceeds the waiting side's by more than this (never less than `damping_margin`).
    /// Resumable and free work keep `damping_margin`. 1.0 is a whole week of the leaf's full
    /// funded rate: a team that far ahead of the waiting one is holding about twice its share,
    /// and only then does its work that cannot resume die for the other. On the scenario family
    /// no run was killed so at 1,024 GPUs and more, and the GPU-hours lost to preemption fell to
    /// 0.00–0.07% from 0.04–0.14% (2.3% on days-long interactive sessions) at 0.3, while funded
    /// teams received 98–100% of what they were owed (README). Reservations and drains are not
    /// affected.
    pub kill_margin: f64,
    /// How many blocked multi-host workloads, best-ranked first, may hold a reservation at once
    /// (DESIGN §4.8). 0 disables reservations and lets large workloads starve.
    pub max_reservations: usize,
    /// The most of the schedulable GPUs reservations may hold together. The first reservation is
    /// always made, whatever its size; a later one only while the total stays within this.
    pub max_reserved_fraction: f64,
    /// The fast lane (DESIGN §4.11): debug work goes to idle GPUs ahead of other allocated work
    /// and may preempt unprotected resumable work of any leaf, while running debug work holds
    /// at most this fraction of the schedulable GPUs (and at least room for one debug workload of
    /// the largest size) — or up to `fast_lane_peak` while the lane's use averaged over the last
    /// `fast_lane_window` is under this fraction. 0 disables the lane.
    pub fast_lane: f64,
    /// The most of the schedulable GPUs debug work may hold through the lane at once, while its
    /// use over the window is under its share (`fast_lane`; never less than that). Debug work
    /// arrives in bursts: 0.2 let a debug-heavy month (4,000 debug workloads a day, 8% of the
    /// GPUs on average) start 93% of them at once instead of 90%, its p99 wait 17 → 8 min, for
    /// under a point of hourly tracking (README).
    pub fast_lane_peak: f64,
    /// The window over which the lane's use is averaged.
    pub fast_lane_window: Time,
    /// The lane's headroom (DESIGN §4.11): other allocated work starts only while at least
    /// `headroom_max_fraction` of the schedulable GPUs (but never more than this many) stay idle,
    /// free or held by unprotected resumable work (what debug work can take at once), so a
    /// cluster just filled with protected work still starts the next debug workloads now. Never
    /// more than the lane's room (so 0 on a cluster whose lane share is under one GPU, and
    /// shrinking as debug work fills the lane). 0 disables it; by default no bound but the
    /// fraction.
    pub headroom_gpus: u32,
    /// The headroom sizes itself to the cluster: this fraction of the schedulable GPUs (rounded
    /// down). It is paid by funded work (GPUs kept idle or lent only to preemptible work): 8
    /// GPUs are under 1% of a 1,024-GPU cluster but 9% of an 88-GPU one, where funded teams at 3x
    /// demand then received 95.4% of what they were owed instead of 97.3%; on 8,192 GPUs a
    /// fixed 8 started eight debug workloads after a flood of protected work and left the rest
    /// waiting for its first protection to end (README).
    pub headroom_max_fraction: f64,
    /// The recent window blended into the ratio siblings are ordered by (not the one preemption
    /// compares): see the `ranking` module. `Recent::OFF` orders by the week's ratio alone.
    pub recent: Recent,
    /// The SLURM peer's weights and limits (read only under [`Policy::Slurm`]).
    pub slurm: SlurmConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::FairShare,
            ledger: LedgerConfig::default(),
            damping_margin: 0.02,
            kill_margin: 1.0,
            max_reservations: 4,
            max_reserved_fraction: 0.5,
            fast_lane: 0.1,
            fast_lane_peak: 0.2,
            fast_lane_window: crate::ids::HOUR,
            headroom_gpus: u32::MAX,
            headroom_max_fraction: 0.01,
            recent: Recent {
                window: 2 * crate::ids::HOUR,
                weight: 0.15,
            },
            slurm: SlurmConfig::default(),
        }
    }
}

/// The scheduling engine. It owns the tree and the ledger; each decision reads a snapshot and a
/// time, and returns actions without changing anything (but the SLURM peer's record of the
/// priorities it last calculated, which SLURM itself recalculates only once a period). The driver applies the actions, books the
/// charges ([`Engine::ledger_mut`]) and asks again at the next event or `next_wake`.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    tree: BudgetTree,
    ledger: Ledger,
    /// The SLURM peer's priorities as last calculated (it recalculates once per period, as
    /// SLURM does); unused by the other policies.
    slurm_book: Mutex<slurm::Book>,
    /// The priority baseline's queue kept for a driver that names its changes.
    baseline_book: Mutex<BaselineBook>,
    /// The pool a driver that names its changes left at its last pass ([`Engine::decide_after`]).
    kept: Mutex<Kept>,
    /// Fair share's queue kept for such a driver.
    lineup: Mutex<Lineup>,
    /// The standings of the last fair-share pass, whose lists the next one reuses.
    standings: Mutex<Standings>,
    /// The last fair-share pass's buffers, which the next one reuses.
    scratch: Mutex<crate::decide::Scratch>,
    /// The same for the priority baseline's queue order.
    order_buffers: Mutex<crate::baseline_order::OrderBuffers>,
}

// The server shares one engine between threads: what it keeps from pass to pass must allow that.
const _: () = {
    const fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Engine>();
};

impl Clone for Engine {
    fn clone(&self) -> Engine {
        Engine {
            config: self.config,
            tree: self.tree.clone(),
            ledger: self.ledger.clone(),
            slurm_book: Mutex::new(self.slurm_book().clone()),
            baseline_book: Mutex::default(),
            kept: Mutex::default(),
            lineup: Mutex::default(),
            standings: Mutex::default(),
            scratch: Mutex::default(),
            order_buffers: Mutex::default(),
        }
    }
}

impl Engine {
    pub fn new(tree: BudgetTree, config: Config) -> Engine {
        let ledger = Ledger::new(&tree, config.ledger);
        Engine {
            config,
            tree,
            ledger,
            slurm_book: Mutex::default(),
            baseline_book: Mutex::default(),
            kept: Mutex::default(),
            lineup: Mutex::default(),
            standings: Mutex::default(),
            scratch: Mutex::default(),
            order_buffers: Mutex::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Switches policy (or damping, or reservations); the ledger's window is kept as it was.
    pub fn set_config(&mut self, config: Config) {
        self.config = Config {
            ledger: self.ledger.config(),
            ..config
        };
    }

    pub(crate) fn slurm_book(&self) -> MutexGuard<'_, slurm::Book> {
        self.slurm_book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The priority baseline's queue kept between passes, brought up to `queued`
    /// ([`crate::baseline_book`]).
    pub(crate) fn baseline_book(
        &self,
        queued: &[WorkloadSpec],
        changes: &Changes<'_>,
    ) -> MutexGuard<'_, BaselineBook> {
        let mut book = self.baseline_book.lock().unwrap_or_else(|e| e.into_inner());
        book.follow(queued, changes);
        book
    }

    /// The pool for a pass: built from the snapshot, or, for a driver that names its changes,
    /// the one kept at its previous pass brought up to date ([`crate::pool::Kept`]).
    pub(crate) fn pool_for_pass<F: Fn(BudgetId) -> u32>(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        build: Build<'_, F>,
        changes: Option<&Changes<'_>>,
    ) -> Box<Pool> {
        match changes {
            None => Box::new(Pool::new(
                state,
                now,
                build.ranks,
                build.rank_of,
                build.victim_from,
            )),
            Some(changes) => self
                .kept()
                .pool_for(self.config.policy, state, changes, now, build),
        }
    }

    /// The pool for a pass of a peer (the priority baseline, the SLURM peer): no leaf ranks, and
    /// only work not `baseline_protected` may ever be preempted.
    pub(crate) fn peer_pool_for_pass(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        changes: Option<&Changes<'_>>,
    ) -> Box<Pool> {
        let victim_from = |r: &Run| (!r.baseline_protected).then_some(Time::MIN);
        let build = Build {
            ranks: 1,
            rank_of: |_| 0,
            order: &[],
            victim_from,
        };
        self.pool_for_pass(state, now, build, changes)
    }

    /// Keeps the pass's pool for the driver's next pass, if it names its changes.
    pub(crate) fn keep_pool(&self, pool: Box<Pool>, changes: Option<&Changes<'_>>) {
        if let Some(changes) = changes {
            self.kept().keep(pool, self.config.policy, changes);
        }
    }

    /// Fair share's queue kept between passes, brought up to `queued` ([`crate::lineup`]).
    pub(crate) fn lineup(
        &self,
        queued: &[crate::snapshot::WorkloadSpec],
        changes: &Changes<'_>,
        node_size: u32,
    ) -> MutexGuard<'_, Lineup> {
        let mut lineup = self.lineup.lock().unwrap_or_else(|e| e.into_inner());
        lineup.update(queued, changes, self.tree.len(), node_size);
        lineup
    }

    pub(crate) fn order_buffers(&self) -> MutexGuard<'_, crate::baseline_order::OrderBuffers> {
        self.order_buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn scratch(&self) -> MutexGuard<'_, crate::decide::Scratch> {
        self.scratch.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn tree(&self) -> &BudgetTree {
        &self.tree
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Book charges and capacity changes here as they happen.
    pub fn ledger_mut(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// Records approved new shares, in force from `effective_from` (see [`BudgetTree::add_version`]).
    pub fn add_share_version(
        &mut self,
        effective_from: Time,
        changes: impl IntoIterator<Item = (BudgetId, f64)>,
    ) -> Result<(), TreeError> {
        self.tree.add_version(effective_from, changes)
    }

    /// Every node's usage, allocation and ratio at `now`, and the Fair-Tree order of leaves.
    pub fn standings(&self, now: Time) -> Standings {
        Standings::compute_with(&self.tree, &self.ledger, now, self.config.recent)
    }

    /// [`Engine::standings`] for a pass, in the lists of the last pass's standings (handed back
    /// with [`Engine::keep_standings`]): worked out at every event, they are not allocated anew.
    pub(crate) fn pass_standings(&self, now: Time) -> Standings {
        let mut standings = std::mem::take(&mut *self.kept_standings());
        standings.recompute(&self.tree, &self.ledger, now, self.config.recent);
        standings
    }

    /// Keeps a pass's standings for the next pass to reuse.
    pub(crate) fn keep_standings(&self, standings: Standings) {
        *self.kept_standings() = standings;
    }

    fn kept_standings(&self) -> MutexGuard<'_, Standings> {
        self.standings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One decision pass. Deterministic: the same engine, snapshot and time give the same decision,
    /// whatever the order of the snapshot's vectors.
    pub fn decide(&self, state: &ClusterState<'_>, now: Time) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(self.run_pass(state, now, None, None).0)
    }

    /// [`Engine::decide`] for a driver that names what it changed since its previous pass: the
    /// same decision, without reading the whole snapshot again where the engine kept what it
    /// built for that pass (see [`Changes`]).
    pub fn decide_after(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        changes: &Changes<'_>,
    ) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(self.run_pass(state, now, None, Some(changes)).0)
    }

    /// Why a queued workload waits (or that it would start now). `None` if it is not queued.
    pub fn explain(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        workload: WorkloadId,
    ) -> Result<Option<Explanation>, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(explain::explain(self, state, now, workload))
    }

    /// The priority baseline's pass walking the whole queue in order, as it was before the
    /// queue was taken lazily: the reference the property tests hold [`Engine::decide`] to
    /// (feature `full-walk`, tests only).
    #[cfg(feature = "full-walk")]
    pub fn baseline_by_full_walk(
        &self,
        state: &ClusterState<'_>,
        now: Time,
    ) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(priority::baseline_walk(self, state, now, None, priority::Walk::Full, None).0)
    }

    /// The SLURM peer's pass taking every job at its turn and making every search, with none of
    /// the lazy pass's shortcuts: the reference the property tests hold [`Engine::decide`] to
    /// (feature `full-walk`, tests only).
    #[cfg(feature = "full-walk")]
    pub fn slurm_by_full_walk(
        &self,
        state: &ClusterState<'_>,
        now: Time,
    ) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(slurm::walk(self, state, now, None, priority::Walk::Full, None).0)
    }

    /// The fair-share pass searching for every request the headroom holds back, with none of
    /// the shortcuts that skip those searches: the reference the property tests hold
    /// [`Engine::decide`] to (feature `full-walk`, tests only).
    #[cfg(feature = "full-walk")]
    pub fn fair_share_without_shortcuts(
        &self,
        state: &ClusterState<'_>,
        now: Time,
    ) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(decide::fair_share_with(self, state, now, None, decide::Shortcuts::Off, None).0)
    }

    /// The decision of the pass that explains `watch`: the property tests hold it equal to
    /// [`Engine::decide`]'s (feature `full-walk`, tests only).
    #[cfg(feature = "full-walk")]
    pub fn decide_watching(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        watch: WorkloadId,
    ) -> Result<Decision, SnapshotError> {
        state.validate(&self.tree)?;
        Ok(self.run_pass(state, now, Some(watch), None).0)
    }

    pub(crate) fn run_pass(
        &self,
        state: &ClusterState<'_>,
        now: Time,
        watch: Option<WorkloadId>,
        changes: Option<&Changes<'_>>,
    ) -> (Decision, Option<explain::WaitReason>) {
        match self.config.policy {
            Policy::FairShare => decide::fair_share(self, state, now, watch, changes),
            Policy::Priority => priority::baseline(self, state, now, watch, changes),
            Policy::Slurm => slurm::pass(self, state, now, watch, changes),
        }
    }
}
