//! Why a workload waits, as data (the Workload and Queue pages turn it into sentences).

use crate::cluster::{NodeGpus, Placement};
use crate::engine::{Engine, Policy};
use crate::ids::{BudgetId, NodeId, Time, WorkloadId};
use crate::pool::{Held, Pool};
use crate::queue::QueueKey;
use crate::snapshot::{ClusterState, WorkloadSpec};

/// A queued workload's situation at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub workload: WorkloadId,
    /// 1-based position in queue order (DESIGN §4.4, or the baseline's priority order).
    pub position: usize,
    pub queue_len: usize,
    /// Its leaf's 1-based Fair-Tree rank among all leaves.
    pub leaf_rank: u32,
    /// From the root's child down to its leaf.
    pub path: Vec<PathStep>,
    pub waiting_for: WaitReason,
}

/// One level of the path to a workload's leaf: how served it is and where it stands among siblings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathStep {
    pub node: BudgetId,
    /// GPU-seconds charged in the window.
    pub usage: f64,
    /// GPU-seconds funded in the window.
    pub allocated: f64,
    pub ratio: f64,
    /// The same ratio over the engine's recent window; siblings are ordered by the two blended
    /// (see the `ranking` module).
    pub recent_ratio: f64,
    /// 1-based position among its siblings, and how many there are.
    pub sibling_rank: u32,
    pub siblings: u32,
    /// The sibling ranked first, when it is not this node: who goes ahead at this level.
    pub ahead: Option<Ahead>,
}

/// The sibling that ranks first at a level of a waiting workload's path, and its ratios.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ahead {
    pub node: BudgetId,
    pub ratio: f64,
    pub recent_ratio: f64,
}

/// What a queued workload is waiting for.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitReason {
    /// Nothing: this decision starts it here.
    StartsNow { placement: Placement },
    /// It holds a reservation: these GPUs are kept for it and it starts by `at`, when the work on
    /// them has finished or become preemptible by it.
    OwnReservation { at: Time, gpus: Vec<NodeGpus> },
    /// It would fit, but the GPUs are reserved for a workload ahead of it, and its own minimum
    /// runtime would not end before that reservation starts.
    ReservedAhead { holder: WorkloadId, at: Time },
    /// Not enough GPUs, counting idle ones and work it may preempt.
    Capacity {
        /// Idle GPUs on healthy hosts.
        idle_gpus: u32,
        /// GPUs of work it may preempt once protection ends, and when the first protection ends.
        protected_gpus: u32,
        protected_until: Option<Time>,
        /// GPUs of work whose leaf ranks at least as well as its own (or is the same leaf).
        outranking_gpus: u32,
        /// GPUs of work ranked below it but within the damping margin (for work that cannot
        /// resume, the wider kill margin: `Config::kill_margin`).
        within_margin_gpus: u32,
        /// Who holds the GPUs: the work it may preempt soonest (with the moment it may), then
        /// the largest work it may not preempt (`None`): ranked at least as well as its own, or
        /// within the damping (or kill) margin.
        holders: Vec<(WorkloadId, Option<Time>)>,
    },
    /// Unallocated work takes only idle GPUs, after all allocated work; work that cannot resume,
    /// after unallocated work that can as well (`resumable_ahead` of which still wait), and only
    /// while no allocated work waits (`funded_waiting`: some does).
    IdleOnly {
        idle_gpus: u32,
        resumable_ahead: u32,
        funded_waiting: bool,
    },
    /// It would start, but only by taking the fast lane's headroom (DESIGN §4.11): these GPUs are
    /// kept idle, free or held by preemptible work so that short debug work starts at once.
    Headroom { kept_gpus: u32 },
    /// It fits only on hosts that take no new work (cordoned, unhealthy or down).
    HostsOutOfService { nodes: Vec<NodeId> },
    /// It asks for more GPUs than any placement on this cluster can give.
    TooLarge { gpus: u32, largest_placement: u32 },
}

impl WaitReason {
    /// Waiting for GPUs where only idle ones are known (the peers' passes: nothing is protected
    /// for a time, no ratios are compared).
    pub(crate) fn idle_only(idle_gpus: u32) -> WaitReason {
        WaitReason::Capacity {
            idle_gpus,
            protected_gpus: 0,
            protected_until: None,
            outranking_gpus: 0,
            within_margin_gpus: 0,
            holders: Vec::new(),
        }
    }
}

pub(crate) fn explain(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    workload: WorkloadId,
) -> Option<Explanation> {
    let w = *state.queued.iter().find(|q| q.id == workload)?;
    let standings = engine.standings(now);
    let ahead = match engine.config().policy {
        Policy::FairShare | Policy::Priority => {
            let key = |q: &WorkloadSpec| match engine.config().policy {
                Policy::FairShare => QueueKey::fair_share(q, standings.leaf_rank(q.leaf)),
                _ => QueueKey::baseline(q),
            };
            let mine = key(&w);
            state.queued.iter().filter(|q| key(q) < mine).count()
        }
        Policy::Slurm => crate::slurm::keys(engine, state, now)
            .iter()
            .position(|&(_, q)| state.queued[q as usize].id == workload)
            .unwrap_or(0),
    };
    let path = engine
        .tree()
        .path_ids(w.leaf)
        .into_iter()
        .map(|node| {
            let (rank, of) = standings.sibling_rank(node);
            let ahead = engine.tree().parent(node).and_then(|parent| {
                engine
                    .tree()
                    .children(parent)
                    .iter()
                    .copied()
                    .find(|&s| s != node && standings.sibling_rank(s).0 == 0)
                    .map(|s| Ahead {
                        node: s,
                        ratio: standings.ratio(s),
                        recent_ratio: standings.recent_ratio(s),
                    })
            });
            PathStep {
                node,
                usage: standings.usage(node),
                allocated: standings.allocated(node),
                ratio: standings.ratio(node),
                recent_ratio: standings.recent_ratio(node),
                sibling_rank: rank + 1,
                siblings: of,
                ahead,
            }
        })
        .collect();
    let waiting_for = match out_of_reach(state, w.gpus) {
        Some(reason) => reason,
        None => engine
            .run_pass(state, now, Some(workload), None)
            .1
            .unwrap_or(WaitReason::IdleOnly {
                idle_gpus: 0,
                resumable_ahead: 0,
                funded_waiting: false,
            }),
    };
    Some(Explanation {
        workload,
        position: ahead + 1,
        queue_len: state.queued.len(),
        leaf_rank: standings.leaf_rank(w.leaf) + 1,
        path,
        waiting_for,
    })
}

/// Requests no healthy placement can ever satisfy, whatever runs.
fn out_of_reach(state: &ClusterState<'_>, gpus: u32) -> Option<WaitReason> {
    let largest_node = state.nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
    let healthy = |n: &&crate::cluster::NodeState| n.health.takes_new_work();
    let (healthy_reach, all_reach) = if gpus <= largest_node {
        let best = state
            .nodes
            .iter()
            .filter(healthy)
            .map(|n| n.gpus)
            .max()
            .unwrap_or(0);
        (best, largest_node)
    } else {
        let total = |it: &mut dyn Iterator<Item = u32>| it.sum::<u32>();
        (
            total(&mut state.nodes.iter().filter(healthy).map(|n| n.gpus)),
            total(&mut state.nodes.iter().map(|n| n.gpus)),
        )
    };
    if healthy_reach >= gpus {
        None
    } else if all_reach >= gpus {
        let nodes = (0..state.nodes.len())
            .filter(|&i| !state.nodes[i].health.takes_new_work())
            .filter(|&i| gpus > largest_node || state.nodes[i].gpus >= gpus)
            .map(|i| NodeId(i as u32))
            .collect();
        Some(WaitReason::HostsOutOfService { nodes })
    } else {
        Some(WaitReason::TooLarge {
            gpus,
            largest_placement: all_reach,
        })
    }
}

/// Why an allocated workload that could not start now waits, given whose work it may preempt
/// once its protection ends (`may_take`).
pub(crate) fn blocked_reason(
    pool: &Pool,
    w: &WorkloadSpec,
    rank: u32,
    may_take: &dyn Fn(&crate::pool::Run) -> bool,
    may_backfill: &dyn Fn(&Held) -> bool,
) -> WaitReason {
    if let Some(h) = pool.held.iter().find(|h| h.live && h.workload == w.id) {
        return WaitReason::OwnReservation {
            at: h.at,
            gpus: h.parts.clone(),
        };
    }
    let now = pool.now;
    let victim =
        |r: &crate::pool::Run| !r.spec.is_allocated() || (!r.is_protected(now) && may_take(r));
    let ignoring_holds = crate::placement::Rules {
        may_backfill: &|_: &Held| true,
        victim: Some(&victim),
        only: None,
    };
    if pool.find(w.gpus, &ignoring_holds).is_some() {
        if let Some(h) = pool.held.iter().find(|h| h.live && !may_backfill(h)) {
            return WaitReason::ReservedAhead {
                holder: h.workload,
                at: h.at,
            };
        }
    }
    let (mut protected_gpus, mut outranking_gpus, mut within_margin_gpus) = (0, 0, 0);
    let mut protected_until: Option<Time> = None;
    let (mut soonest, mut largest) = (Vec::new(), Vec::new());
    for r in pool
        .runs
        .iter()
        .filter(|r| r.alive && r.spec.is_allocated())
    {
        if may_take(r) {
            if r.is_protected(now) {
                protected_gpus += r.usable_gpus;
                let until = r.protected_until.unwrap_or(now);
                protected_until = Some(protected_until.map_or(until, |t| t.min(until)));
                soonest.push((until, r.spec.id));
            }
        } else {
            largest.push((std::cmp::Reverse(r.usable_gpus), r.spec.id));
            if r.rank <= rank {
                outranking_gpus += r.usable_gpus;
            } else {
                within_margin_gpus += r.usable_gpus;
            }
        }
    }
    soonest.sort_unstable();
    largest.sort_unstable();
    let holders = soonest
        .into_iter()
        .take(2)
        .map(|(at, id)| (id, Some(at)))
        .chain(largest.into_iter().take(2).map(|(_, id)| (id, None)))
        .collect();
    WaitReason::Capacity {
        idle_gpus: pool.idle_total,
        protected_gpus,
        protected_until,
        outranking_gpus,
        within_margin_gpus,
        holders,
    }
}
