//! The event loop: arrivals, completions, outages and the engine's own wake-ups, in time order.
//! Nothing ticks: the clock jumps to the next event, every event at one second is applied, and
//! the engine decides once for all of them (again at the same second if it requeued work).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use super::files::Cluster;
use super::timeline::{Segment, SegmentEnd};
use super::{SimConfig, SimInput};
use crate::cluster::{GpuSet, Health, NodeState, Placement};
use crate::engine::{Config, Engine};
use crate::ids::{NodeId, Time, WorkloadId};
use crate::ledger::LedgerConfig;
use crate::reasons::{Action, AfterStop, DrainRule, Protection};
use crate::settle::Settle;
use crate::snapshot::{Changes, ClusterState, EndedRun, RunningWorkload, WorkloadSpec};

const NONE: u32 = u32::MAX;

/// How a workload left the simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobEnd {
    Completed,
    /// Non-resumable and preempted, drained or on a host that went down: its progress is lost.
    Killed,
}

/// One workload's story, for the measures.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub spec: WorkloadSpec,
    /// The trace row it came from (index into [`SimInput::trace`]).
    pub row: u32,
    pub remaining: Time,
    pub first_start: Option<Time>,
    pub requeued_at: Option<Time>,
    pub end: Option<(Time, JobEnd)>,
    run: u32,
    protected_until: Option<Time>,
    baseline_protected: bool,
}

/// Everything the run leaves behind for the measures.
pub(crate) struct Outcome {
    pub engine: Engine,
    pub horizon: Time,
    pub jobs: Vec<Job>,
    pub segments: Vec<Segment>,
    pub requeue_waits: Vec<Time>,
    pub by_reason: BTreeMap<&'static str, u64>,
    /// GPU-seconds of progress lost by non-resumable work, by the rule that stopped it.
    pub lost_by_reason: BTreeMap<&'static str, f64>,
    /// Of those, GPU-seconds lost to preemption (not to drains), allocated work then free work.
    pub lost_to_preemption: [f64; 2],
    pub decisions: u64,
    pub capped: u64,
    /// GPU-seconds healthy GPUs sat idle while some workload was queued.
    pub idle_while_waiting: f64,
}

struct Sim<'a> {
    cluster: &'a Cluster,
    engine: Engine,
    nodes: Vec<NodeState>,
    free: Vec<GpuSet>,
    running: Vec<RunningWorkload>,
    queued: Vec<WorkloadSpec>,
    /// Debug runs that ended within the fast lane's window, oldest first.
    ended_debug: VecDeque<EndedRun>,
    /// Per job: its index in `queued` or `running`, or `NONE`.
    qpos: Vec<u32>,
    rpos: Vec<u32>,
    /// Indices of `running` and `queued` written since the last pass, and the passes so far:
    /// the engine keeps what it built for a pass and updates it from these ([`Changes`]).
    touched_running: Vec<u32>,
    touched_queued: Vec<u32>,
    passes: u64,
    jobs: Vec<Job>,
    completions: BinaryHeap<Reverse<(Time, u32, u32)>>,
    segments: Vec<Segment>,
    requeue_waits: Vec<Time>,
    by_reason: BTreeMap<&'static str, u64>,
    lost_by_reason: BTreeMap<&'static str, f64>,
    lost_to_preemption: [f64; 2],
    decisions: u64,
    wake: Option<Time>,
    /// Idle GPUs on healthy hosts, kept as work starts and stops and hosts change state.
    idle_healthy: u32,
    /// Since when the idle-while-waiting account is up to date.
    accounted: Time,
    idle_while_waiting: f64,
}

pub(crate) fn simulate(input: &SimInput, config: &SimConfig) -> Outcome {
    let cluster = &input.cluster;
    let mut order: Vec<u32> = (0..input.trace.len() as u32).collect();
    order.sort_by_key(|&i| (input.trace[i as usize].submit, input.trace[i as usize].line));
    let mut capped = 0;
    let jobs: Vec<Job> = order
        .iter()
        .enumerate()
        .map(|(k, &row)| {
            let r = &input.trace[row as usize];
            if r.min_runtime > config.max_min_runtime {
                capped += 1;
            }
            Job {
                spec: WorkloadSpec {
                    id: WorkloadId(k as u64),
                    leaf: r.leaf,
                    gpus: r.gpus,
                    min_runtime: r.min_runtime.min(config.max_min_runtime),
                    resumable: r.resumable,
                    priority: r.priority,
                    submitted_at: r.submit,
                    time_limit: Some(config.time_limit(r.duration)),
                },
                row,
                remaining: r.duration,
                first_start: None,
                requeued_at: None,
                end: None,
                run: 0,
                protected_until: None,
                baseline_protected: false,
            }
        })
        .collect();
    let horizon = config
        .horizon
        .unwrap_or_else(|| jobs.last().map_or(0, |j| j.spec.submitted_at));

    let engine_config = Config {
        policy: config.policy,
        ledger: LedgerConfig {
            window: config.window,
            bucket: crate::ids::HOUR,
            decay_half_life: config.slurm.decay_half_life,
        },
        slurm: config.slurm,
        kill_margin: config.kill_margin,
        ..Config::default()
    };
    let mut engine = Engine::new(input.tree.clone(), engine_config);
    // The cluster has been idle for a full window before the trace starts: everyone at ratio 0.
    engine
        .ledger_mut()
        .set_capacity(-config.window, cluster.total_gpus());

    let n = jobs.len();
    let mut sim = Sim {
        cluster,
        engine,
        nodes: cluster
            .nodes
            .iter()
            .map(|c| NodeState {
                gpus: c.gpus,
                health: Health::Healthy,
            })
            .collect(),
        free: cluster
            .nodes
            .iter()
            .map(|c| GpuSet::first(c.gpus))
            .collect(),
        running: Vec::new(),
        queued: Vec::new(),
        ended_debug: VecDeque::new(),
        qpos: vec![NONE; n],
        rpos: vec![NONE; n],
        touched_running: Vec::new(),
        touched_queued: Vec::new(),
        passes: 0,
        jobs,
        completions: BinaryHeap::new(),
        segments: Vec::new(),
        requeue_waits: Vec::new(),
        by_reason: BTreeMap::new(),
        lost_by_reason: BTreeMap::new(),
        lost_to_preemption: [0.0; 2],
        decisions: 0,
        wake: None,
        idle_healthy: cluster.total_gpus(),
        accounted: 0,
        idle_while_waiting: 0.0,
    };

    let mut transitions: Vec<(Time, u8, NodeId, Health)> = Vec::new();
    for o in &cluster.outages {
        transitions.push((o.from, 1, o.node, o.state));
        transitions.push((o.to, 0, o.node, Health::Healthy));
    }
    transitions.sort();

    let mut next_arrival = 0usize;
    let mut next_transition = 0usize;
    loop {
        let candidates = [
            sim.jobs.get(next_arrival).map(|j| j.spec.submitted_at),
            sim.next_completion(),
            transitions.get(next_transition).map(|t| t.0),
            sim.wake,
        ];
        let Some(now) = candidates.into_iter().flatten().min() else {
            sim.account_idle(horizon);
            break;
        };
        sim.account_idle(now.min(horizon));
        if now > horizon {
            break;
        }
        let mut must_decide = sim.wake == Some(now);
        while let Some(&Reverse((t, job, run))) = sim.completions.peek() {
            if t != now {
                break;
            }
            sim.completions.pop();
            if sim.jobs[job as usize].run == run && sim.rpos[job as usize] != NONE {
                sim.stop(job, now, SegmentEnd::Completed);
                sim.jobs[job as usize].end = Some((now, JobEnd::Completed));
                must_decide = true;
            }
        }
        let mut health_changed = false;
        while let Some(&(t, _, node, health)) = transitions.get(next_transition) {
            if t != now {
                break;
            }
            sim.nodes[node.0 as usize].health = health;
            next_transition += 1;
            health_changed = true;
        }
        if health_changed {
            let healthy = sim
                .nodes
                .iter()
                .filter(|n| n.health == Health::Healthy)
                .map(|n| n.gpus)
                .sum();
            sim.idle_healthy = sim
                .nodes
                .iter()
                .zip(&sim.free)
                .filter(|(n, _)| n.health == Health::Healthy)
                .map(|(_, f)| f.count())
                .sum();
            sim.engine.ledger_mut().set_capacity(now, healthy);
            must_decide = true;
        }
        while let Some(job) = sim.jobs.get(next_arrival) {
            if job.spec.submitted_at != now {
                break;
            }
            let spec = job.spec;
            must_decide |= spec.is_allocated() || sim.idle_could_fit(spec.gpus);
            sim.enqueue(next_arrival as u32);
            next_arrival += 1;
        }
        if must_decide {
            sim.decide(now);
        } else if sim.wake.is_some_and(|w| w <= now) {
            sim.wake = None;
        }
    }
    sim.finish(horizon, capped)
}

impl Sim<'_> {
    /// Adds the idle healthy GPUs since the last event, if anything waited meanwhile.
    fn account_idle(&mut self, now: Time) {
        if now > self.accounted && !self.queued.is_empty() {
            self.idle_while_waiting += f64::from(self.idle_healthy) * (now - self.accounted) as f64;
        }
        self.accounted = self.accounted.max(now);
    }

    /// Moves `gpus` of host `node` between idle and busy, counting them if the host is healthy.
    fn set_free(&mut self, node: NodeId, gpus: GpuSet, free: bool) {
        let i = node.0 as usize;
        self.free[i] = if free {
            self.free[i].union(gpus)
        } else {
            self.free[i].without(gpus)
        };
        if self.nodes[i].health == Health::Healthy {
            if free {
                self.idle_healthy += gpus.count();
            } else {
                self.idle_healthy -= gpus.count();
            }
        }
    }

    fn next_completion(&mut self) -> Option<Time> {
        while let Some(&Reverse((t, job, run))) = self.completions.peek() {
            if self.jobs[job as usize].run == run && self.rpos[job as usize] != NONE {
                return Some(t);
            }
            self.completions.pop();
        }
        None
    }

    /// Whether unallocated work of this size could start on idle GPUs right now.
    fn idle_could_fit(&self, gpus: u32) -> bool {
        let node_size = self.cluster.node_size();
        let healthy = self.nodes.iter().zip(&self.free);
        if gpus <= node_size {
            healthy
                .filter(|(n, _)| n.health == Health::Healthy)
                .any(|(_, f)| f.count() >= gpus)
        } else {
            let whole: u32 = healthy
                .filter(|(n, f)| n.health == Health::Healthy && f.count() == n.gpus)
                .map(|(n, _)| n.gpus)
                .sum();
            whole >= gpus
        }
    }

    fn enqueue(&mut self, job: u32) {
        self.qpos[job as usize] = self.queued.len() as u32;
        self.touched_queued.push(self.queued.len() as u32);
        self.queued.push(self.jobs[job as usize].spec);
    }

    fn dequeue(&mut self, job: u32) {
        let at = self.qpos[job as usize] as usize;
        self.queued.swap_remove(at);
        self.touched_queued.push(at as u32);
        if let Some(moved) = self.queued.get(at) {
            self.qpos[moved.id.0 as usize] = at as u32;
        }
        self.qpos[job as usize] = NONE;
    }

    fn decide(&mut self, now: Time) {
        let since = now - self.engine.config().fast_lane_window;
        while self
            .ended_debug
            .front()
            .is_some_and(|r| r.ended_at <= since)
        {
            self.ended_debug.pop_front();
        }
        let mut settle = Settle::new();
        while settle.next_pass() {
            let state = ClusterState {
                nodes: &self.nodes,
                running: &self.running,
                queued: &self.queued,
                ended_debug: self.ended_debug.make_contiguous(),
            };
            debug_assert_eq!(state.validate(self.engine.tree()), Ok(()));
            let changes = Changes {
                pass: self.passes,
                running: &self.touched_running,
                queued: &self.touched_queued,
            };
            let (decision, _) = self.engine.run_pass(&state, now, None, Some(&changes));
            self.passes += 1;
            self.touched_running.clear();
            self.touched_queued.clear();
            self.decisions += 1;
            self.wake = decision.next_wake;
            settle.applied(&decision);
            for action in decision.actions {
                self.apply(action, now);
            }
        }
    }

    fn apply(&mut self, action: Action, now: Time) {
        match action {
            Action::Start {
                workload,
                placement,
                protection,
            } => self.start(workload.0 as u32, placement, protection, now),
            Action::Preempt {
                workload,
                reason,
                then,
            } => {
                let key = reason.rule.name();
                self.stop_for(workload.0 as u32, now, key, SegmentEnd::Preempted, then)
            }
            Action::Drain {
                workload,
                reason,
                then,
            } => {
                let key = match reason.rule {
                    DrainRule::HostCordoned => "host-cordoned",
                    DrainRule::HostUnhealthy => "host-unhealthy",
                    DrainRule::HostDown => "host-down",
                };
                self.stop_for(workload.0 as u32, now, key, SegmentEnd::Drained, then)
            }
        }
    }

    fn start(&mut self, job: u32, placement: Placement, protection: Protection, now: Time) {
        self.dequeue(job);
        let j = &mut self.jobs[job as usize];
        match j.first_start {
            None => j.first_start = Some(now),
            Some(_) => {
                if let Some(at) = j.requeued_at.take() {
                    self.requeue_waits.push(now - at);
                }
            }
        }
        j.run += 1;
        j.protected_until = match protection {
            Protection::Until(t) => Some(t),
            Protection::None | Protection::UntilDone => None,
        };
        j.baseline_protected = protection == Protection::UntilDone;
        self.completions
            .push(Reverse((now + j.remaining, job, j.run)));
        let spec = j.spec;
        for part in &placement.parts {
            self.set_free(part.node, part.gpus, false);
        }
        if spec.is_allocated() {
            self.engine
                .ledger_mut()
                .start_charging(spec.leaf, placement.gpu_count(), now);
        }
        self.rpos[job as usize] = self.running.len() as u32;
        self.touched_running.push(self.running.len() as u32);
        self.running.push(RunningWorkload {
            spec,
            started_at: now,
            placement,
            baseline_protected: protection == Protection::UntilDone,
        });
    }

    fn stop_for(
        &mut self,
        job: u32,
        now: Time,
        reason: &'static str,
        end: SegmentEnd,
        then: AfterStop,
    ) {
        *self.by_reason.entry(reason).or_insert(0) += 1;
        if then == AfterStop::Requeue {
            self.stop(job, now, end);
            self.jobs[job as usize].requeued_at = Some(now);
            self.enqueue(job);
        } else {
            let run = &self.running[self.rpos[job as usize] as usize];
            let lost = f64::from(run.placement.gpu_count()) * (now - run.started_at) as f64;
            *self.lost_by_reason.entry(reason).or_insert(0.0) += lost;
            if end == SegmentEnd::Preempted {
                self.lost_to_preemption[usize::from(!run.spec.is_allocated())] += lost;
            }
            self.stop(job, now, SegmentEnd::Killed);
            self.jobs[job as usize].end = Some((now, JobEnd::Killed));
        }
    }

    /// Takes a workload off its GPUs, closes its charge and writes its segment rows.
    fn stop(&mut self, job: u32, now: Time, end: SegmentEnd) {
        let at = self.rpos[job as usize] as usize;
        let run = self.running.swap_remove(at);
        self.touched_running.push(at as u32);
        if let Some(moved) = self.running.get(at) {
            self.rpos[moved.spec.id.0 as usize] = at as u32;
        }
        self.rpos[job as usize] = NONE;
        if run.spec.is_allocated() {
            self.engine
                .ledger_mut()
                .stop_charging(run.spec.leaf, run.placement.gpu_count(), now);
        }
        self.ended_debug.extend(run.ended_debug_run(now));
        let j = &mut self.jobs[job as usize];
        j.remaining -= now - run.started_at;
        let protected_until = if j.baseline_protected {
            Some(now)
        } else {
            j.protected_until
        };
        let row = j.row;
        for part in &run.placement.parts {
            self.set_free(part.node, part.gpus, true);
            self.segments.push(Segment {
                job,
                row,
                leaf: run.spec.leaf,
                node: part.node,
                gpus: part.gpus,
                start: run.started_at,
                end: now,
                allocated: run.spec.is_allocated(),
                protected_until,
                end_kind: end,
            });
        }
    }

    fn finish(mut self, horizon: Time, capped: u64) -> Outcome {
        let mut still: Vec<u32> = self.running.iter().map(|r| r.spec.id.0 as u32).collect();
        still.sort_unstable();
        for job in still {
            self.stop(job, horizon, SegmentEnd::Running);
        }
        for j in &self.jobs {
            if let Some(at) = j.requeued_at.filter(|_| j.end.is_none()) {
                if at <= horizon {
                    self.requeue_waits.push(horizon - at);
                }
            }
        }
        self.segments
            .sort_by_key(|s| (s.start, s.job, s.node, s.end));
        self.requeue_waits.sort_unstable();
        Outcome {
            engine: self.engine,
            horizon,
            jobs: self.jobs,
            segments: self.segments,
            requeue_waits: self.requeue_waits,
            by_reason: self.by_reason,
            lost_by_reason: self.lost_by_reason,
            lost_to_preemption: self.lost_to_preemption,
            decisions: self.decisions,
            capped,
            idle_while_waiting: self.idle_while_waiting,
        }
    }
}
