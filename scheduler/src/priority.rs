//! The priority baseline (DESIGN §4, last paragraph): the pre-budget world the simulator compares
//! against. Global priority, then age; each leaf may hold protected GPUs up to its share of the
//! healthy cluster; protected work is never preempted; everything else is preemptible at once, and
//! is preempted by protected starts of equal or higher priority. No reservations: large work waits.
//!
//! What makes debug work wait here, as under the reference's old scheduler: a debug workload that
//! says normal or low may not preempt higher-priority work around it, and one whose leaf is at its
//! cap runs preemptible on idle GPUs only; both wait for idle GPUs behind every older
//! higher-priority workload that fits them. The scenario family gives it its best case (debug work
//! says high; see `sim::scenario::PriorityMix`).
//!
//! A pass takes the queue lazily (`baseline_order`): the decisions are those of walking the
//! whole queue in order, without sorting the long tail that can only wait for idle GPUs.

use std::cell::OnceCell;

use crate::baseline_order::{LazyOrder, Turn};
use crate::cluster::Health;
use crate::engine::Engine;
use crate::explain::WaitReason;
use crate::health::drain_hosts;
use crate::ids::{BudgetId, Time, WorkloadId};
use crate::placement::{Rules, IDLE_ONLY};
use crate::pool::{Held, Run};
use crate::ranking;
use crate::reasons::{Action, AfterStop, Decision, Party, PreemptReason, PreemptRule, Protection};
use crate::snapshot::{Changes, ClusterState, WorkloadSpec};

pub(crate) fn baseline(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    baseline_walk(engine, state, now, watch, Walk::Lazy, changes)
}

/// How a pass takes the queue: lazily, or every workload at its turn (the reference the
/// property tests compare the lazy walk with).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    Lazy,
    Full,
}

pub(crate) fn baseline_walk(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    walk: Walk,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    let party = parties(engine, now);
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

    let healthy: u32 = state
        .nodes
        .iter()
        .filter(|n| n.health.takes_new_work())
        .map(|n| n.gpus)
        .sum();
    let shares = engine.tree().version_at(now);
    let caps: Vec<u32> = (0..engine.tree().len())
        .map(|i| {
            let node = BudgetId(i as u32);
            (shares.fraction(node) * f64::from(healthy) + 1e-9).floor() as u32
        })
        .collect();
    let cap = |leaf: BudgetId| caps[leaf.index()];
    let mut protected_used = vec![0u32; engine.tree().len()];
    for run in 0..pool.runs.len() as u32 {
        let r = &pool.runs[run as usize];
        if r.alive && r.baseline_protected {
            let held: u32 = pool.parts_of(run).iter().map(|p| p.gpus.count()).sum();
            protected_used[r.spec.leaf.index()] += held;
        }
    }

    // Preemptible GPUs on hosts that take work, by priority: a protected start can only free
    // those of no higher priority than its own. Work started in this pass is never preempted by
    // it, so is not counted.
    let mut preemptible = ByPriority::default();
    for r in pool
        .runs
        .iter()
        .filter(|r| r.alive && !r.baseline_protected)
    {
        preemptible.add(r.spec.priority, r.usable_gpus);
    }
    // Idle plus preemptible GPUs only shrink during a pass: larger requests cannot start.
    let reach = pool.idle_total + pool.baseline_preemptible_gpus;
    let idle = pool.idle_total;
    // A driver that names its changes gets the queue kept between passes; the rest, and a pass
    // that explains one workload or takes every workload at its turn, read it afresh.
    let book = match (changes, watch, walk) {
        (Some(changes), None, Walk::Lazy) => Some(engine.baseline_book(state.queued, changes)),
        _ => None,
    };
    let turn = |w: &WorkloadSpec| {
        if watch == Some(w.id) || walk == Walk::Full {
            Turn::Always
        } else if w.gpus > reach {
            Turn::Never
        } else if !(w.is_allocated() && protected_used[w.leaf.index()] + w.gpus <= cap(w.leaf)) {
            Turn::IfIdleFits
        } else if w.gpus > idle + preemptible.up_to(w.priority) {
            Turn::UntilPreemption
        } else {
            Turn::Always
        }
    };
    let buffers = std::mem::take(&mut *engine.order_buffers());
    let mut order = match &book {
        Some(book) => LazyOrder::from_book(state.queued, book, buffers, turn),
        None => LazyOrder::new(state.queued, buffers, turn),
    };
    let mut watched = None;
    let everywhere = |_: &Held| true;
    // Searches that found nothing since the last preemption: a later request at least as large,
    // of no higher priority (so with no more victims), fails the same way and is not searched.
    let mut failed: Vec<(bool, u32, i32)> = Vec::new();
    loop {
        // With nothing idle, only a protected start that preempts can change anything; once
        // none of the rest could gather its GPUs, the pass is over.
        if walk == Walk::Lazy
            && pool.idle_total == 0
            && order.none_could_gather(|p| preemptible.up_to(p))
        {
            break;
        }
        let Some(q) = order.next(pool.idle_fit()) else {
            break;
        };
        if pool.idle_total == 0 && pool.baseline_preemptible_gpus == 0 {
            break;
        }
        let w = state.queued[q as usize];
        let protect = w.is_allocated() && protected_used[w.leaf.index()] + w.gpus <= cap(w.leaf);
        let victim = |r: &Run| !r.baseline_protected && r.spec.priority <= w.priority;
        let choice = if pool.idle_could_fit(w.gpus) {
            pool.find(
                w.gpus,
                &Rules {
                    may_backfill: &everywhere,
                    victim: IDLE_ONLY,
                    only: None,
                },
            )
        } else {
            None
        }
        .or_else(|| {
            let reach = pool.idle_total + preemptible.up_to(w.priority);
            let gang = w.gpus > pool.node_size;
            let hopeless = failed
                .iter()
                .any(|&(g, gpus, priority)| g == gang && w.gpus >= gpus && w.priority <= priority);
            if !protect || reach < w.gpus || hopeless {
                return None;
            }
            let found = pool.find(
                w.gpus,
                &Rules {
                    may_backfill: &everywhere,
                    victim: Some(&victim),
                    only: None,
                },
            );
            if found.is_none() {
                failed.push((gang, w.gpus, w.priority));
            }
            found
        });
        let Some(choice) = choice else {
            if watch == Some(w.id) {
                watched = Some(WaitReason::idle_only(pool.idle_total));
            }
            continue;
        };
        if !choice.victims.is_empty() {
            failed.clear();
            order.preempted();
        }
        for &v in &choice.victims {
            let r = &pool.runs[v as usize];
            actions.push(preempt(r, PreemptRule::Priority, now, &party, &w));
            preemptible.remove(r.spec.priority, r.usable_gpus);
            pool.release(v);
        }
        pool.occupy(w, 0, &choice.placement, protect);
        if protect {
            protected_used[w.leaf.index()] += choice.placement.gpu_count();
        }
        if watch == Some(w.id) {
            watched = Some(WaitReason::StartsNow {
                placement: choice.placement.clone(),
            });
        }
        actions.push(Action::Start {
            workload: w.id,
            placement: choice.placement,
            protection: if protect {
                Protection::UntilDone
            } else {
                Protection::None
            },
        });
    }
    if watch.is_some() && watched.is_none() {
        watched = Some(WaitReason::idle_only(pool.idle_total));
    }
    let decision = Decision {
        actions,
        reservations: Vec::new(),
        next_wake: None,
        decide_again: pool.decide_again(),
    };
    *engine.order_buffers() = order.into_buffers();
    engine.keep_pool(pool, changes);
    (decision, watched)
}

/// A leaf's standing for preemption and drain reasons, worked out on first use: most passes
/// need none, and a preemption needs two leaves', not the whole tree ranked.
pub(crate) fn parties(engine: &Engine, now: Time) -> impl Fn(&WorkloadSpec) -> Party + '_ {
    let allocated = OnceCell::new();
    move |spec: &WorkloadSpec| {
        let allocated = allocated.get_or_init(|| engine.ledger().allocated_all(engine.tree(), now));
        Party {
            workload: spec.id,
            leaf: spec.leaf,
            ratio: ranking::ratio(
                engine.ledger().usage(spec.leaf, now),
                allocated[spec.leaf.index()],
                engine.tree().version_at(now).fraction(spec.leaf),
            ),
            priority: spec.priority,
        }
    }
}

/// The preemption of `victim` (not protected for a time) under `rule`, for `preemptor`.
pub(crate) fn preempt(
    victim: &Run,
    rule: PreemptRule,
    now: Time,
    party: &dyn Fn(&WorkloadSpec) -> Party,
    preemptor: &WorkloadSpec,
) -> Action {
    Action::Preempt {
        workload: victim.spec.id,
        reason: PreemptReason {
            rule,
            at: now,
            preemptor: party(preemptor),
            victim: party(&victim.spec),
            victim_started_at: victim.started_at,
            victim_min_runtime: victim.spec.min_runtime,
            victim_protected_until: None,
        },
        then: AfterStop::after_preemption(victim.spec.resumable),
    }
}

/// GPUs per priority level; a pass sees only a few levels.
#[derive(Default)]
struct ByPriority(Vec<(i32, u32)>);

impl ByPriority {
    fn add(&mut self, priority: i32, gpus: u32) {
        match self.0.iter_mut().find(|p| p.0 == priority) {
            Some(p) => p.1 += gpus,
            None => self.0.push((priority, gpus)),
        }
    }

    fn remove(&mut self, priority: i32, gpus: u32) {
        if let Some(p) = self.0.iter_mut().find(|p| p.0 == priority) {
            p.1 = p.1.saturating_sub(gpus);
        }
    }

    /// GPUs at `priority` or below.
    fn up_to(&self, priority: i32) -> u32 {
        self.0.iter().filter(|p| p.0 <= priority).map(|p| p.1).sum()
    }
}
