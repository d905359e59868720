//! The SLURM peer: what a well-configured SLURM site would run instead of Hourglass, so the
//! simulator can answer "would SLURM do as well?" on the same trace ([`crate::Policy::Slurm`]).
//!
//! Configured as sites configure it (each page is what this module follows):
//! - `PriorityType=priority/multifactor` with the Fair Tree fair-share factor on usage decayed with
//!   a half-life (`PriorityDecayHalfLife`, 7 days by default: [`crate::LedgerConfig`]), plus age
//!   (saturating at `PriorityMaxAge`, 7 days), job size and QOS factors; the weights are
//!   [`SlurmConfig`]'s. See [`priority`], <https://slurm.schedmd.com/priority_multifactor.html> and
//!   <https://slurm.schedmd.com/fair_tree.html>.
//! - Three QOS: work with `min_runtime = 0` runs in a *scavenger* QOS that every other job may
//!   preempt, with requeue (`PreemptType=preempt/qos`, `PreemptMode=REQUEUE`:
//!   <https://slurm.schedmd.com/preempt.html>); debug work (DESIGN §5's definition) in a *debug* QOS
//!   of the highest priority, as sites give their short debug queue; the rest in *normal*. No
//!   fair-share preemption: running normal and debug jobs run to completion.
//! - `SchedulerType=sched/backfill` as EASY backfill: jobs are taken in priority order; the first
//!   that cannot start (scavenger work aside) is given the earliest start its GPUs allow, judged by
//!   the running jobs' time limits, and reserves those GPUs; a lower-priority job starts only where
//!   it leaves that start alone — on GPUs the reservation does not need, or, by its own time limit,
//!   ending before it (<https://slurm.schedmd.com/sched_config.html>). SLURM's backfill runs every
//!   30 s over a bounded number of jobs; this one runs at every event over the whole queue, its
//!   best case.
//!
//! Priorities are recalculated once per `PriorityCalcPeriod` (5 minutes), as SLURM does; a job
//! submitted in between gets its priority at submission ([`book`]).
//!
//! Time limits come with the work ([`crate::WorkloadSpec::time_limit`]; the simulator sets them
//! from the trace's true durations); work without one gets [`SlurmConfig::max_wall`]. A job is
//! never stopped at its limit here: limits only shape the backfill plan.

mod book;
mod classes;
mod priority;

use crate::cluster::Health;
use crate::engine::Engine;
use crate::explain::WaitReason;
use crate::health::drain_hosts;
use crate::ids::{Time, WorkloadId, DAY};
use crate::placement::{Rules, IDLE_ONLY};
use crate::pool::{Held, Pool, Run};
use crate::priority::{parties, preempt, Walk};
use crate::queue::QueueKey;
use crate::reasons::{Action, Decision, PreemptRule, Protection};
use crate::snapshot::{Changes, ClusterState, WorkloadSpec};

pub(crate) use book::Book;
use book::Cursor;

/// The SLURM peer's settings: the multifactor weights (integers, as in `slurm.conf`) and limits.
/// The defaults are the example configuration of SLURM's multifactor page (fair share 10,000,
/// age 1,000, job size 1,000) with a QOS weight a site with a debug QOS would set: 20,000, so
/// debug work (QOS factor 1) goes ahead of normal work (0.5) whatever the fair-share factors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlurmConfig {
    pub weight_fairshare: u32,
    pub weight_age: u32,
    pub weight_job_size: u32,
    pub weight_qos: u32,
    /// `PriorityMaxAge`: queued this long, the age factor is 1. Default 7 days.
    pub max_age: Time,
    /// The partition's `MaxTime`: the time limit of work that gives none. Default 7 days.
    pub max_wall: Time,
    /// `PriorityCalcPeriod`: every pending job's priority is recalculated this often (a job
    /// submitted in between gets its priority at submission). Default 5 minutes; 0 recalculates
    /// at every pass.
    pub calc_period: Time,
    /// `PriorityDecayHalfLife`. Default 7 days. The ledger keeps the decayed usage
    /// ([`crate::LedgerConfig::decay_half_life`]); drivers copy this there.
    pub decay_half_life: Time,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            weight_fairshare: 10_000,
            weight_age: 1_000,
            weight_job_size: 1_000,
            weight_qos: 20_000,
            max_age: 7 * DAY,
            max_wall: 7 * DAY,
            calc_period: 5 * 60,
            decay_half_life: 7 * DAY,
        }
    }
}

impl SlurmConfig {
    fn limit(&self, w: &WorkloadSpec) -> Time {
        w.time_limit.unwrap_or(self.max_wall).max(1)
    }
}

/// Scavenger work: free, preemptible by any other job at once.
fn scavenger(w: &WorkloadSpec) -> bool {
    !w.is_allocated()
}

/// The queue in SLURM's order at `now`: by the priorities of the last calculation.
pub(crate) fn keys(engine: &Engine, state: &ClusterState<'_>, now: Time) -> Vec<(QueueKey, u32)> {
    let mut book = engine.slurm_book();
    book.update(engine, state.queued, now, cluster_gpus(state), None);
    book.in_order()
}

fn cluster_gpus(state: &ClusterState<'_>) -> u32 {
    state
        .nodes
        .iter()
        .filter(|n| n.health.takes_new_work())
        .map(|n| n.gpus)
        .sum()
}

pub(crate) fn pass(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    walk(engine, state, now, watch, Walk::Lazy, changes)
}

/// A pass taking the queue lazily, or every job at its turn with every search made (the
/// reference the property tests hold the lazy pass to).
pub(crate) fn walk(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    mode: Walk,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    let lazy = mode == Walk::Lazy;
    let config = engine.config().slurm;
    let party = parties(engine, now);
    // Running normal and debug jobs are `baseline_protected` (started with `UntilDone`):
    // only scavenger work is ever preempted.
    let mut pool = engine.peer_pool_for_pass(state, now, changes);
    let mut actions = Vec::new();
    if state.nodes.iter().any(|n| n.health != Health::Healthy) {
        drain_hosts(
            &mut pool,
            &party,
            &|r: &Run| r.baseline_protected.then_some(Time::MAX),
            &mut actions,
        );
    }
    let mut watched = None;
    let finish = |actions, watched: Option<WaitReason>, pool: Box<Pool>| {
        let watched = watched.or_else(|| watch.map(|_| WaitReason::idle_only(pool.idle_total)));
        let decision = Decision {
            actions,
            reservations: Vec::new(),
            next_wake: None,
            decide_again: pool.decide_again(),
        };
        engine.keep_pool(pool, changes);
        (decision, watched)
    };
    // Nothing idle and nothing to preempt: no job can start, and a reservation only matters to
    // jobs that could.
    if lazy
        && ((pool.idle_total == 0 && pool.baseline_preemptible_gpus == 0)
            || state.queued.is_empty())
    {
        if let Some(changes) = changes {
            // The book follows the driver's changes pass by pass, or reads the whole queue
            // next time (without recalculating here: that stays with the passes that start
            // work, as for a driver handing over whole snapshots).
            engine.slurm_book().follow_only(state.queued, changes);
        }
        return finish(actions, watched, pool);
    }
    let mut book = engine.slurm_book();
    book.update(engine, state.queued, now, cluster_gpus(state), changes);

    let mut cursor = Cursor::default();
    // After the reservation: which jobs could still start.
    let mut narrowed: Option<Narrowed> = None;
    let keeps = |narrowed: &Option<Narrowed>, q: u32| {
        narrowed
            .as_ref()
            .is_none_or(|n| n.keeps(&state.queued[q as usize]))
    };
    // GPUs freed when: scavenger work at once (any job may preempt it), the rest at the end of
    // its time limit.
    let free_at = |r: &Run| {
        Some(if scavenger(&r.spec) {
            now
        } else {
            r.started_at.saturating_add(config.limit(&r.spec))
        })
    };
    let mut reserved: Option<WorkloadId> = None;
    // Searches that failed since the last preemption: `(victims allowed, gang, gpus, limit)`. A
    // request of the same kind (one host, or whole hosts) at least as large, with a limit at least
    // as long (so no more reserved GPUs it may use), under the same rule fails the same way. Not
    // across kinds: hosts of mixed sizes may hold no host for a request up to the largest, yet
    // enough small whole hosts for a gang.
    let mut failed: Vec<(bool, bool, u32, Time)> = Vec::new();
    let smallest = book.smallest();
    loop {
        // Scavenger work starts on idle GPUs alone: while too few are idle for any of it, it is
        // passed over until the next normal job (which may preempt some and leave GPUs idle).
        let skip = lazy && watch.is_none() && pool.idle_total < book.smallest_scavenger();
        let Some((key, q)) = cursor.next_skipping(&book, &|q| keeps(&narrowed, q), skip) else {
            break;
        };
        let w = state.queued[q as usize];
        let normal = !scavenger(&w);
        let reach = pool.idle_total
            + if normal {
                pool.baseline_preemptible_gpus
            } else {
                0
            };
        if lazy
            && reserved.is_some()
            && watch.is_none()
            && pool.idle_total + pool.baseline_preemptible_gpus < smallest
        {
            // Nothing left could start: the pass is over.
            break;
        }
        // Scavenger work may use reserved GPUs whatever its limit (the holder preempts it): for
        // what it may use, as a job whose limit ends at once.
        let limit = if normal { config.limit(&w) } else { 0 };
        let ends_by = now.saturating_add(limit);
        let may_backfill = |h: &Held| ends_by <= h.at;
        let victim = |r: &Run| scavenger(&r.spec) && !r.fresh;
        let gang = w.gpus > pool.node_size;
        let hopeless = |failed: &[(bool, bool, u32, Time)], victims: bool| {
            lazy && failed
                .iter()
                .any(|&(v, g, gpus, l)| v == victims && g == gang && w.gpus >= gpus && limit >= l)
        };
        let mut choice = None;
        if w.gpus <= pool.idle_total && pool.idle_could_fit(w.gpus) && !hopeless(&failed, false) {
            choice = pool.find(
                w.gpus,
                &Rules {
                    may_backfill: &may_backfill,
                    victim: IDLE_ONLY,
                    only: None,
                },
            );
            if choice.is_none() {
                failed.push((false, gang, w.gpus, limit));
            }
        }
        if choice.is_none() && normal && w.gpus <= reach && !hopeless(&failed, true) {
            choice = pool.find(
                w.gpus,
                &Rules {
                    may_backfill: &may_backfill,
                    victim: Some(&victim),
                    only: None,
                },
            );
            if choice.is_none() {
                failed.push((true, gang, w.gpus, limit));
            }
        }
        let Some(choice) = choice else {
            if normal && reserved.is_none() {
                // EASY backfill: the first job that cannot start reserves its earliest start.
                if let Some((at, parts)) = pool.earliest_by(w.gpus, &free_at) {
                    pool.reserve(w.id, key, at, parts);
                    reserved = Some(w.id);
                    failed.clear();
                    if lazy {
                        narrowed = Some(Narrowed::new(&pool, &book, state, &config, at));
                        cursor.rule_changed(&|q| keeps(&narrowed, q));
                    }
                }
            }
            if watch == Some(w.id) {
                watched = Some(WaitReason::idle_only(pool.idle_total));
            }
            continue;
        };
        if !choice.victims.is_empty() {
            failed.clear();
        }
        for &v in &choice.victims {
            actions.push(preempt(
                &pool.runs[v as usize],
                PreemptRule::FreeWork,
                now,
                &party,
                &w,
            ));
            pool.release(v);
        }
        pool.occupy(w, 0, &choice.placement, normal);
        if watch == Some(w.id) {
            watched = Some(WaitReason::StartsNow {
                placement: choice.placement.clone(),
            });
        }
        actions.push(Action::Start {
            workload: w.id,
            placement: choice.placement,
            protection: if normal {
                Protection::UntilDone
            } else {
                Protection::None
            },
        });
    }
    finish(actions, watched, pool)
}

/// After the reservation (starting at `at`): the jobs that could still start. Nothing a pass
/// does adds to a host's idle and scavenger GPUs together, so a normal job needs no more than
/// those on one host (on whole such hosts for a gang), outside the reserved GPUs unless its limit
/// ends by `at`; scavenger work needs idle GPUs, which only a normal job's preemption can add to.
struct Narrowed {
    /// Idle outside the reservation and scavenger work there.
    open: Room,
    /// Idle and scavenger anywhere.
    any: Room,
    /// For scavenger work: `any` if some normal job could start (and preempt), else idle GPUs.
    scavenger_room: Room,
    now: Time,
    at: Time,
    node_size: u32,
    config: SlurmConfig,
}

impl Narrowed {
    fn new(
        pool: &Pool,
        book: &Book,
        state: &ClusterState<'_>,
        config: &SlurmConfig,
        at: Time,
    ) -> Narrowed {
        let mut open = Room::default();
        let mut any = Room::default();
        let mut idle = Room::default();
        for (node, slot) in pool.slots.iter().enumerate() {
            if !slot.schedulable() {
                continue;
            }
            let mut scavenged = crate::cluster::GpuSet::EMPTY;
            for &(run, held) in pool.slot_runs(node) {
                let r = &pool.runs[run as usize];
                if r.alive && scavenger(&r.spec) {
                    scavenged = scavenged.union(held);
                }
            }
            let takeable = slot.free.union(scavenged);
            open.add(takeable.without(slot.reserved).count(), slot.size);
            any.add(takeable.count(), slot.size);
            idle.add(slot.free.count(), slot.size);
        }
        let mut narrowed = Narrowed {
            open,
            any,
            scavenger_room: idle,
            now: pool.now,
            at,
            node_size: pool.node_size,
            config: *config,
        };
        if book.any_normal(&|q| narrowed.normal_could(&state.queued[q as usize])) {
            narrowed.scavenger_room = any;
        }
        narrowed
    }

    fn normal_could(&self, w: &WorkloadSpec) -> bool {
        self.open.holds(w.gpus, self.node_size)
            || (self.now.saturating_add(self.config.limit(w)) <= self.at
                && self.any.holds(w.gpus, self.node_size))
    }

    fn keeps(&self, w: &WorkloadSpec) -> bool {
        if scavenger(w) {
            self.scavenger_room.holds(w.gpus, self.node_size)
        } else {
            self.normal_could(w)
        }
    }
}

/// GPUs a kind of request could gather: the most on one host, and the sum over whole hosts.
#[derive(Clone, Copy, Default)]
struct Room {
    one_host: u32,
    whole_hosts: u32,
}

impl Room {
    fn add(&mut self, gpus: u32, host_size: u32) {
        self.one_host = self.one_host.max(gpus);
        if gpus == host_size {
            self.whole_hosts += gpus;
        }
    }

    fn holds(&self, gpus: u32, node_size: u32) -> bool {
        if gpus <= node_size {
            gpus <= self.one_host
        } else {
            gpus <= self.whole_hosts
        }
    }
}
