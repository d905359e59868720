//! A tiny driver for scenarios: it holds a snapshot, applies decisions the way the simulator and
//! the server will, and books charges in the engine's ledger.

use std::collections::BTreeMap;

use scheduler::*;

pub struct World {
    pub engine: Engine,
    pub nodes: Vec<NodeState>,
    pub running: Vec<RunningWorkload>,
    pub queued: Vec<WorkloadSpec>,
    pub now: Time,
    /// Run time still needed by each workload that has a duration.
    pub remaining: BTreeMap<WorkloadId, Time>,
    pub finished: Vec<(WorkloadId, Time)>,
    pub log: Vec<(Time, Action)>,
    /// Debug runs that ended, for the fast lane's window (the engine ignores those before it).
    pub ended_debug: Vec<EndedRun>,
    next_id: u64,
}

impl World {
    /// `nodes` hosts of `gpus` GPUs, a tree from `shares`, idle for the whole window before 0.
    pub fn new(shares: &[(&str, f64)], nodes: usize, gpus: u32) -> World {
        World::with_config(shares, nodes, gpus, Config::default())
    }

    pub fn with_config(shares: &[(&str, f64)], nodes: usize, gpus: u32, config: Config) -> World {
        let tree = BudgetTree::from_paths(shares.iter().copied()).expect("valid tree");
        let mut engine = Engine::new(tree, config);
        let capacity = nodes as u32 * gpus;
        engine
            .ledger_mut()
            .set_capacity(-config.ledger.window, capacity);
        World {
            engine,
            nodes: vec![
                NodeState {
                    gpus,
                    health: Health::Healthy
                };
                nodes
            ],
            running: Vec::new(),
            queued: Vec::new(),
            now: 0,
            remaining: BTreeMap::new(),
            finished: Vec::new(),
            log: Vec::new(),
            ended_debug: Vec::new(),
            next_id: 1,
        }
    }

    pub fn leaf(&self, path: &str) -> BudgetId {
        self.engine.tree().leaf(path).expect("known leaf")
    }

    /// Books `gpu_hours` of past usage to `path`, in the day before now.
    pub fn history(&mut self, path: &str, gpu_hours: f64) {
        let leaf = self.leaf(path);
        let now = self.now;
        self.engine
            .ledger_mut()
            .charge(leaf, now - DAY, now, gpu_hours * 3_600.0);
    }

    pub fn spec(&mut self, path: &str, gpus: u32, min_runtime: Time) -> WorkloadSpec {
        let id = WorkloadId(self.next_id);
        self.next_id += 1;
        WorkloadSpec {
            id,
            leaf: self.leaf(path),
            gpus,
            min_runtime,
            resumable: true,
            priority: 0,
            submitted_at: self.now,
            time_limit: None,
        }
    }

    pub fn submit(&mut self, path: &str, gpus: u32, min_runtime: Time) -> WorkloadId {
        let spec = self.spec(path, gpus, min_runtime);
        self.queued.push(spec);
        spec.id
    }

    pub fn submit_spec(&mut self, spec: WorkloadSpec) -> WorkloadId {
        self.queued.push(spec);
        spec.id
    }

    /// Puts a workload straight onto GPUs, as if it had started at `started_at`.
    pub fn place(
        &mut self,
        spec: WorkloadSpec,
        started_at: Time,
        parts: &[(u32, &[u32])],
    ) -> WorkloadId {
        let placement = Placement {
            parts: parts
                .iter()
                .map(|&(node, gpus)| NodeGpus {
                    node: NodeId(node),
                    gpus: GpuSet::of(gpus),
                })
                .collect(),
        };
        if spec.is_allocated() {
            let held = placement.gpu_count();
            self.engine
                .ledger_mut()
                .start_charging(spec.leaf, held, started_at);
        }
        self.running.push(RunningWorkload {
            spec,
            started_at,
            placement,
            baseline_protected: false,
        });
        spec.id
    }

    /// Shortcut: a resumable workload of `path` on `gpus` of `node`, started at `started_at`.
    pub fn running(
        &mut self,
        path: &str,
        min_runtime: Time,
        started_at: Time,
        node: u32,
        gpus: &[u32],
    ) -> WorkloadId {
        let spec = self.spec(path, gpus.len() as u32, min_runtime);
        self.place(spec, started_at, &[(node, gpus)])
    }

    pub fn state(&self) -> ClusterState<'_> {
        ClusterState {
            nodes: &self.nodes,
            running: &self.running,
            queued: &self.queued,
            ended_debug: &self.ended_debug,
        }
    }

    pub fn decide(&self) -> Decision {
        self.engine
            .decide(&self.state(), self.now)
            .expect("valid snapshot")
    }

    pub fn explain(&self, id: WorkloadId) -> Explanation {
        self.engine
            .explain(&self.state(), self.now, id)
            .expect("valid snapshot")
            .expect("queued")
    }

    /// Decides and applies the decision.
    pub fn step(&mut self) -> Decision {
        let decision = self.decide();
        self.apply(&decision);
        decision
    }

    pub fn apply(&mut self, decision: &Decision) {
        for action in &decision.actions {
            self.log.push((self.now, action.clone()));
            match action {
                Action::Start {
                    workload,
                    placement,
                    protection,
                } => {
                    let at = self
                        .queued
                        .iter()
                        .position(|q| q.id == *workload)
                        .expect("queued");
                    let spec = self.queued.remove(at);
                    if spec.is_allocated() {
                        self.engine.ledger_mut().start_charging(
                            spec.leaf,
                            placement.gpu_count(),
                            self.now,
                        );
                    }
                    self.running.push(RunningWorkload {
                        spec,
                        started_at: self.now,
                        placement: placement.clone(),
                        baseline_protected: *protection == Protection::UntilDone,
                    });
                }
                Action::Preempt { workload, then, .. } | Action::Drain { workload, then, .. } => {
                    let run = self.stop(*workload, self.now);
                    if *then == AfterStop::Requeue {
                        self.queued.push(run.spec);
                    } else {
                        self.remaining.remove(workload);
                    }
                }
            }
        }
    }

    fn stop(&mut self, id: WorkloadId, at: Time) -> RunningWorkload {
        let index = self
            .running
            .iter()
            .position(|r| r.spec.id == id)
            .expect("running");
        let run = self.running.remove(index);
        self.ended_debug.extend(run.ended_debug_run(at));
        if run.spec.is_allocated() {
            self.engine
                .ledger_mut()
                .stop_charging(run.spec.leaf, run.placement.gpu_count(), at);
        }
        if let Some(left) = self.remaining.get_mut(&id) {
            *left -= at - run.started_at;
        }
        run
    }

    /// Moves time forward, finishing every workload whose duration has run out on the way.
    pub fn advance_to(&mut self, t: Time) {
        loop {
            let next = self
                .running
                .iter()
                .filter_map(|r| {
                    self.remaining
                        .get(&r.spec.id)
                        .map(|left| (r.started_at + left, r.spec.id))
                })
                .filter(|&(end, _)| end <= t)
                .min();
            let Some((end, id)) = next else { break };
            self.stop(id, end);
            self.remaining.remove(&id);
            self.finished.push((id, end));
        }
        self.now = t;
    }
}

pub fn starts(decision: &Decision) -> Vec<(WorkloadId, &Placement)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Start {
                workload,
                placement,
                ..
            } => Some((*workload, placement)),
            _ => None,
        })
        .collect()
}

pub fn preempted(decision: &Decision) -> Vec<WorkloadId> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { workload, .. } => Some(*workload),
            _ => None,
        })
        .collect()
}

pub fn drained(decision: &Decision) -> Vec<(WorkloadId, DrainRule, AfterStop)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Drain {
                workload,
                reason,
                then,
            } => Some((*workload, reason.rule, *then)),
            _ => None,
        })
        .collect()
}
