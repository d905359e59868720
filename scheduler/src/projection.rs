//! When each queued workload is likely to start: the engine run forward from one snapshot.
//!
//! Nobody tells the scheduler how long work runs, so the driver supplies an estimate per workload
//! (the server uses the median run time of the leaf's recent work). From the snapshot at `now` the
//! projection plays the same decisions the live runtime would make — [`Engine::decide`] through
//! [`Settle`], charges booked as work starts and stops — while running work ends at its estimated
//! time, until every queued workload has started or the projection reaches its limits. Nothing new
//! arrives in the projection, so later submissions that rank ahead can only make a start later.
//!
//! ```
//! use scheduler::*;
//!
//! let tree = BudgetTree::from_paths([("a", 1.0)]).unwrap();
//! let a = tree.leaf("a").unwrap();
//! let mut engine = Engine::new(tree, Config::default());
//! engine.ledger_mut().set_capacity(-7 * DAY, 8);
//! let spec = |id, gpus| WorkloadSpec {
//!     id: WorkloadId(id), leaf: a, gpus, min_runtime: HOUR, resumable: true, priority: 0,
//!     submitted_at: 0,
//!     time_limit: None,
//! };
//! let nodes = [NodeState { gpus: 8, health: Health::Healthy }];
//! let running = [RunningWorkload {
//!     spec: spec(1, 8),
//!     started_at: 0,
//!     placement: Placement { parts: vec![NodeGpus { node: NodeId(0), gpus: GpuSet::first(8) }] },
//!     baseline_protected: false,
//! }];
//! let queued = [spec(2, 8)];
//! let state = ClusterState { nodes: &nodes, running: &running, queued: &queued, ended_debug: &[] };
//! // Everything runs two hours: the running workload ends at 2 h, and the queued one starts then.
//! let projection = project(&engine, &state, 600, |_| 2 * HOUR, Limits::default()).unwrap();
//! assert_eq!(projection.start_of(WorkloadId(2)), Estimate::At(2 * HOUR));
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use crate::cluster::{NodeState, Placement};
use crate::engine::Engine;
use crate::ids::{Time, WorkloadId, DAY};
use crate::reasons::{Action, AfterStop};
use crate::settle::Settle;
use crate::snapshot::{ClusterState, EndedRun, RunningWorkload, SnapshotError, WorkloadSpec};

/// Moments further ahead are at least this fraction (1/STRIDE) of their distance apart.
const STRIDE: Time = 10;

/// How far a projection looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Starts later than `now + horizon` are not projected.
    pub horizon: Time,
    /// At most this many moments are decided (each one a settled set of passes).
    pub moments: usize,
}

impl Default for Limits {
    /// A week ahead, at most 2,000 moments.
    fn default() -> Self {
        Limits {
            horizon: 7 * DAY,
            moments: 2_000,
        }
    }
}

impl Limits {
    /// For a snapshot of this many queued and running workloads: a week, in at most 2,000
    /// moments, fewer for a long queue. Each moment is a pass over the queue and the running work,
    /// so the bound is about 20 million workload-visits in all (2,000 passes over 10,000
    /// workloads), and never below the ~150 moments a busy week takes; a workload beyond reads
    /// [`Estimate::After`] the last moment projected.
    pub fn for_workloads(active: usize) -> Limits {
        Limits {
            moments: (20_000_000 / active.max(1)).clamp(150, 2_000),
            ..Limits::default()
        }
    }
}

/// One queued workload's projected start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimate {
    /// It starts at this moment (`now` if this very decision starts it).
    At(Time),
    /// It had not started by this moment, where the projection stopped.
    After(Time),
    /// It was not queued in the snapshot.
    Unknown,
}

/// Projected starts of the workloads queued in one snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    /// The snapshot's moment.
    pub from: Time,
    /// The last moment projected: a workload not started by then is [`Estimate::After`] it.
    pub until: Time,
    starts: BTreeMap<WorkloadId, Option<Time>>,
    /// Where merged projections stopped at different moments: the moment each workload not
    /// started was projected to (its own cluster's), when it is not `until`.
    after: BTreeMap<WorkloadId, Time>,
}

impl Projection {
    /// Adds another cluster's projection from the same moment. Each workload keeps its own
    /// cluster's figures: one not started is said to start after the moment its own projection
    /// reached (an idle cluster's, which ends at once, says nothing of a busy one's queue).
    /// `until` becomes the earlier of the two.
    pub fn merge(&mut self, other: Projection) {
        for (id, start) in &self.starts {
            if start.is_none() {
                self.after.entry(*id).or_insert(self.until);
            }
        }
        for (id, start) in &other.starts {
            if start.is_none() {
                let reached = other.after.get(id).copied().unwrap_or(other.until);
                self.after.insert(*id, reached);
            }
        }
        self.until = self.until.min(other.until);
        self.starts.extend(other.starts);
    }

    pub fn start_of(&self, workload: WorkloadId) -> Estimate {
        match self.starts.get(&workload) {
            Some(Some(at)) => Estimate::At(*at),
            Some(None) => Estimate::After(self.after.get(&workload).copied().unwrap_or(self.until)),
            None => Estimate::Unknown,
        }
    }

    /// How many of the snapshot's queued workloads start within the projection.
    pub fn started(&self) -> usize {
        self.starts.values().filter(|s| s.is_some()).count()
    }
}

/// Runs the engine forward from `state` at `now`. `run_time` is a workload's whole expected run
/// time: running work ends at `started_at + run_time` (or, already past it, one more `run_time`
/// from `now`: it is evidently longer than usual), queued work runs that long once started, and a
/// resumable workload preempted in the projection keeps the rest for its next start. Moments are
/// exact near `now` and coarser further ahead (a start `d` away is projected within about `d/10`,
/// never earlier than the engine would start it). Deterministic like [`Engine::decide`].
pub fn project(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    run_time: impl Fn(&WorkloadSpec) -> Time,
    limits: Limits,
) -> Result<Projection, SnapshotError> {
    state.validate(engine.tree())?;
    let mut engine = engine.clone();
    let nodes: Vec<NodeState> = state.nodes.to_vec();
    let mut running: Vec<RunningWorkload> = state.running.to_vec();
    let mut queued: Vec<WorkloadSpec> = state.queued.to_vec();
    // Debug runs ended (the fast lane's window), those the projection ends added.
    let mut ended_debug: Vec<EndedRun> = state.ended_debug.to_vec();
    // Work left per workload, and the end of each run in progress (stale entries are skipped:
    // a run's end counts only while the workload still runs from the same start).
    let mut left: BTreeMap<WorkloadId, Time> = BTreeMap::new();
    let mut ends: BinaryHeap<Reverse<(Time, WorkloadId, Time)>> = BinaryHeap::new();
    for r in &running {
        let total = run_time(&r.spec).max(1);
        let elapsed = now - r.started_at;
        let rest = if total > elapsed {
            total - elapsed
        } else {
            total
        };
        left.insert(r.spec.id, rest + elapsed);
        ends.push(Reverse((now + rest, r.spec.id, r.started_at)));
        if r.spec.is_allocated() {
            engine
                .ledger_mut()
                .start_charging(r.spec.leaf, r.placement.gpu_count(), now);
        }
    }
    for q in &queued {
        left.insert(q.id, run_time(q).max(1));
    }
    let mut starts: BTreeMap<WorkloadId, Option<Time>> =
        queued.iter().map(|q| (q.id, None)).collect();
    let mut waiting = starts.len();
    let end_of_view = now + limits.horizon;

    let mut t = now;
    let mut wake: Option<Time> = None;
    let mut moments = 0;
    let mut until = now;
    while waiting > 0 && moments < limits.moments && t <= end_of_view {
        until = t;
        // Runs that end by now, taken off together.
        let mut ended: HashMap<(WorkloadId, Time), Time> = HashMap::new();
        while let Some(&Reverse((at, id, started))) = ends.peek() {
            if at > t {
                break;
            }
            ends.pop();
            ended.insert((id, started), at);
        }
        if !ended.is_empty() {
            running.retain(|r| match ended.get(&(r.spec.id, r.started_at)) {
                Some(&at) => {
                    ended_debug.extend(r.ended_debug_run(at));
                    if r.spec.is_allocated() {
                        engine
                            .ledger_mut()
                            .stop_charging(r.spec.leaf, r.placement.gpu_count(), at);
                    }
                    false
                }
                None => true,
            });
        }
        let since = t - engine.config().fast_lane_window;
        ended_debug.retain(|r| r.ended_at > since);
        let mut settle = Settle::new();
        while settle.next_pass() {
            let view = ClusterState {
                nodes: &nodes,
                running: &running,
                queued: &queued,
                ended_debug: &ended_debug,
            };
            // Validated once above; every later state is one the engine's own actions made.
            debug_assert_eq!(view.validate(engine.tree()), Ok(()));
            let (decision, _) = engine.run_pass(&view, t, None, None);
            wake = decision.next_wake;
            settle.applied(&decision);
            let mut placed: HashMap<WorkloadId, Placement> = HashMap::new();
            for action in decision.actions {
                match action {
                    Action::Start {
                        workload,
                        placement,
                        ..
                    } => {
                        placed.insert(workload, placement);
                    }
                    Action::Preempt { workload, then, .. }
                    | Action::Drain { workload, then, .. } => {
                        let Some(i) = running.iter().position(|r| r.spec.id == workload) else {
                            continue;
                        };
                        let r = running.swap_remove(i);
                        ended_debug.extend(r.ended_debug_run(t));
                        if r.spec.is_allocated() {
                            engine.ledger_mut().stop_charging(
                                r.spec.leaf,
                                r.placement.gpu_count(),
                                t,
                            );
                        }
                        // A workload stopped here is not started again in the same decision.
                        if then == AfterStop::Requeue {
                            let rest = left[&workload] - (t - r.started_at);
                            left.insert(workload, rest.max(1));
                            queued.push(r.spec);
                        }
                    }
                }
            }
            // The starts leave the queue in one sweep, in queue order.
            let mut starting = Vec::with_capacity(placed.len());
            if !placed.is_empty() {
                queued.retain(|q| match placed.remove(&q.id) {
                    Some(placement) => {
                        starting.push((*q, placement));
                        false
                    }
                    None => true,
                });
            }
            for (spec, placement) in starting {
                if let Some(slot @ None) = starts.get_mut(&spec.id) {
                    *slot = Some(t);
                    waiting -= 1;
                }
                if spec.is_allocated() {
                    engine
                        .ledger_mut()
                        .start_charging(spec.leaf, placement.gpu_count(), t);
                }
                ends.push(Reverse((t + left[&spec.id], spec.id, t)));
                running.push(RunningWorkload {
                    spec,
                    started_at: t,
                    placement,
                    baseline_protected: false,
                });
            }
        }
        moments += 1;
        let next_end = ends.peek().map(|Reverse((at, _, _))| *at);
        match [next_end, wake]
            .into_iter()
            .flatten()
            .filter(|&m| m > t)
            .min()
        {
            // The further ahead, the coarser: a moment at least a tenth of the way further, so
            // a start `d` from now is projected within about d/10, and a week takes ~150 moments
            // however busy the cluster.
            Some(next) => t = next.max(t + (t - now) / STRIDE),
            None => break,
        }
    }
    Ok(Projection {
        from: now,
        until: until.max(now),
        starts,
        after: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{GpuSet, Health, NodeGpus, Placement};
    use crate::engine::Config;
    use crate::ids::{NodeId, HOUR};
    use crate::tree::BudgetTree;

    #[test]
    fn a_merged_projection_says_each_workload_waits_past_its_own_clusters_horizon() {
        let waiting = |id: u64, until: Time| Projection {
            from: 0,
            until,
            starts: BTreeMap::from([(WorkloadId(id), None)]),
            after: BTreeMap::new(),
        };
        // An idle cluster's projection ends at once; a busy one's runs a day ahead.
        let idle = Projection {
            from: 0,
            until: 0,
            starts: BTreeMap::new(),
            after: BTreeMap::new(),
        };
        let mut merged = idle;
        merged.merge(waiting(1, 86_400));
        merged.merge(waiting(2, 3_600));
        assert_eq!(merged.start_of(WorkloadId(1)), Estimate::After(86_400));
        assert_eq!(merged.start_of(WorkloadId(2)), Estimate::After(3_600));
        assert_eq!(merged.start_of(WorkloadId(3)), Estimate::Unknown);
        assert_eq!(merged.until, 0);
    }

    fn spec(id: u64, leaf: crate::ids::BudgetId, gpus: u32, at: Time) -> WorkloadSpec {
        WorkloadSpec {
            id: WorkloadId(id),
            leaf,
            gpus,
            min_runtime: HOUR,
            resumable: true,
            priority: 0,
            submitted_at: at,
            time_limit: None,
        }
    }

    fn on(node: u32, gpus: u32) -> Placement {
        Placement {
            parts: vec![NodeGpus {
                node: NodeId(node),
                gpus: GpuSet::first(gpus),
            }],
        }
    }

    /// One team on one 8-GPU host, idle for a week before.
    fn one_host() -> (Engine, crate::ids::BudgetId, [NodeState; 1]) {
        let tree = BudgetTree::from_paths([("a", 1.0)]).unwrap();
        let a = tree.leaf("a").unwrap();
        let mut engine = Engine::new(tree, Config::default());
        engine.ledger_mut().set_capacity(-7 * DAY, 8);
        let host = NodeState {
            gpus: 8,
            health: Health::Healthy,
        };
        (engine, a, [host])
    }

    fn running_on_it(spec: WorkloadSpec) -> RunningWorkload {
        RunningWorkload {
            spec,
            started_at: 0,
            placement: on(0, 8),
            baseline_protected: false,
        }
    }

    #[test]
    fn queued_work_starts_in_turn_as_running_work_ends() {
        let (engine, a, nodes) = one_host();
        let running = [running_on_it(spec(1, a, 8, 0))];
        let queued = [spec(2, a, 8, 10), spec(3, a, 8, 20), spec(4, a, 8, 30)];
        let state = ClusterState {
            nodes: &nodes,
            running: &running,
            queued: &queued,
            ended_debug: &[],
        };
        let p = project(&engine, &state, 100, |_| 3 * HOUR, Limits::default()).unwrap();
        assert_eq!(p.start_of(WorkloadId(2)), Estimate::At(3 * HOUR));
        assert_eq!(p.start_of(WorkloadId(3)), Estimate::At(6 * HOUR));
        assert_eq!(p.start_of(WorkloadId(4)), Estimate::At(9 * HOUR));
        assert_eq!(p.start_of(WorkloadId(1)), Estimate::Unknown);
        assert_eq!(p.started(), 3);

        // Running past its estimate, the running workload is given one more run time from now.
        let late = project(&engine, &state, 4 * HOUR, |_| 3 * HOUR, Limits::default()).unwrap();
        assert_eq!(late.start_of(WorkloadId(2)), Estimate::At(7 * HOUR));

        // Same input, same projection.
        assert_eq!(
            p,
            project(&engine, &state, 100, |_| 3 * HOUR, Limits::default()).unwrap()
        );
    }

    #[test]
    fn a_longer_queue_is_projected_over_fewer_moments() {
        assert_eq!(Limits::for_workloads(10).moments, 2_000);
        assert_eq!(Limits::for_workloads(40_000).moments, 500);
        assert_eq!(Limits::for_workloads(1_000_000).moments, 150);
        assert_eq!(Limits::for_workloads(10).horizon, 7 * DAY);
    }

    #[test]
    fn work_beyond_the_horizon_is_said_to_start_after_it() {
        let (engine, a, nodes) = one_host();
        let running = [running_on_it(spec(1, a, 8, 0))];
        let queued = [spec(2, a, 8, 10), spec(3, a, 8, 20)];
        let state = ClusterState {
            nodes: &nodes,
            running: &running,
            queued: &queued,
            ended_debug: &[],
        };
        let limits = Limits {
            horizon: 5 * DAY,
            moments: 100,
        };
        let p = project(&engine, &state, 0, |_| 3 * DAY, limits).unwrap();
        assert_eq!(p.start_of(WorkloadId(2)), Estimate::At(3 * DAY));
        assert_eq!(p.start_of(WorkloadId(3)), Estimate::After(3 * DAY));
    }

    #[test]
    fn a_queued_workload_that_fits_now_starts_now_and_free_work_waits_for_idle_gpus() {
        let tree = BudgetTree::from_paths([("a", 1.0), ("b", 1.0)]).unwrap();
        let a = tree.leaf("a").unwrap();
        let b = tree.leaf("b").unwrap();
        let mut engine = Engine::new(tree, Config::default());
        engine.ledger_mut().set_capacity(-7 * DAY, 24);
        let host = NodeState {
            gpus: 8,
            health: Health::Healthy,
        };
        let nodes = [host, host, host];
        let running = [RunningWorkload {
            spec: spec(1, a, 8, 0),
            started_at: 0,
            placement: on(0, 8),
            baseline_protected: false,
        }];
        // Free work on two whole hosts: one is idle now, the other once the running work ends.
        let free = WorkloadSpec {
            min_runtime: 0,
            ..spec(3, b, 16, 5)
        };
        let queued = [spec(2, b, 8, 10), free];
        let state = ClusterState {
            nodes: &nodes,
            running: &running,
            queued: &queued,
            ended_debug: &[],
        };
        let p = project(&engine, &state, 60, |_| 2 * HOUR, Limits::default()).unwrap();
        assert_eq!(p.start_of(WorkloadId(2)), Estimate::At(60));
        assert_eq!(p.start_of(WorkloadId(3)), Estimate::At(2 * HOUR));
    }
}
