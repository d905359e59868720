//! DESIGN §5 measures over `[0, horizon]`, computed from the run's segments and the workloads'
//! submit, first start and end times — the same data the timeline and trace carry, so anyone can
//! recompute them.

use std::collections::BTreeMap;

use super::report::{
    DeliveredOverOwed, LostByClass, NodeReport, Report, TimeLimits, WaitStats, Waits, Workloads,
};
use super::run::{JobEnd, Outcome};
use super::timeline::SegmentEnd;
use super::{SimConfig, SimInput};
use crate::engine::Policy;
use crate::ids::{Time, HOUR};

pub use crate::snapshot::{DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};

/// GPU-seconds per hour of `[0, horizon)`.
struct Hours {
    horizon: Time,
    values: Vec<f64>,
}

impl Hours {
    fn new(horizon: Time) -> Hours {
        Hours {
            horizon,
            values: vec![0.0; (horizon.max(0) as usize).div_ceil(HOUR as usize)],
        }
    }

    /// Adds `gpus` GPUs held over `[from, to)`, clipped to the horizon.
    fn add(&mut self, from: Time, to: Time, gpus: f64) {
        let (from, to) = (from.max(0), to.min(self.horizon));
        let mut t = from;
        while t < to {
            let h = t / HOUR;
            let edge = ((h + 1) * HOUR).min(to);
            self.values[h as usize] += gpus * (edge - t) as f64;
            t = edge;
        }
    }

    fn total(&self) -> f64 {
        self.values.iter().sum()
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

pub(crate) fn measure(input: &SimInput, config: &SimConfig, out: &Outcome) -> Report {
    let policy = config.policy;
    let tree = &input.tree;
    let cluster = &input.cluster;
    let horizon = out.horizon;
    let node_size = cluster.node_size();

    // Healthy capacity, hour by hour, and each host's time out of service.
    let mut capacity = Hours::new(horizon);
    for node in &cluster.nodes {
        capacity.add(0, horizon, f64::from(node.gpus));
    }
    let mut outages: Vec<Vec<(Time, Time)>> = vec![Vec::new(); cluster.nodes.len()];
    for o in &cluster.outages {
        let gpus = f64::from(cluster.nodes[o.node.0 as usize].gpus);
        capacity.add(o.from, o.to, -gpus);
        outages[o.node.0 as usize].push((o.from, o.to));
    }

    // Busy GPU time on healthy hosts; charged and free time per leaf.
    let leaves = tree.len();
    let mut charged: Vec<Hours> = (0..leaves).map(|_| Hours::new(horizon)).collect();
    let mut free_gpu_s = vec![0.0; leaves];
    let (mut busy, mut busy_free, mut lost) = (0.0, 0.0, 0.0);
    for s in &out.segments {
        let gpus = f64::from(s.gpus.count());
        let out_of_service: Time = outages[s.node.0 as usize]
            .iter()
            .map(|&(a, b)| (b.min(s.end) - a.max(s.start)).max(0))
            .sum();
        let healthy_s = gpus * (s.end - s.start - out_of_service) as f64;
        busy += healthy_s;
        if s.allocated {
            charged[s.leaf.0 as usize].add(s.start, s.end, gpus);
        } else {
            busy_free += healthy_s;
            free_gpu_s[s.leaf.0 as usize] += s.gpu_seconds();
        }
        if s.end_kind == SegmentEnd::Killed {
            lost += s.gpu_seconds();
        }
    }

    // Demand: GPUs asked for by work queued or running, from submit to its end or the horizon.
    let mut demand: Vec<Hours> = (0..leaves).map(|_| Hours::new(horizon)).collect();
    let mut workloads = Workloads {
        submitted: 0,
        completed: 0,
        killed: 0,
        unfinished: 0,
    };
    let (mut waits, mut debug, mut large) = (Vec::new(), Vec::new(), Vec::new());
    // Per leaf: (sum, count) of multi-host waits and of single-host non-debug allocated waits.
    let mut team_waits = vec![[(0.0f64, 0u64); 2]; leaves];
    for j in out.jobs.iter().filter(|j| j.spec.submitted_at <= horizon) {
        let spec = &j.spec;
        workloads.submitted += 1;
        let until = match j.end {
            Some((t, JobEnd::Completed)) => {
                workloads.completed += 1;
                t
            }
            Some((t, JobEnd::Killed)) => {
                workloads.killed += 1;
                t
            }
            None => {
                workloads.unfinished += 1;
                horizon
            }
        };
        let gpus = f64::from(spec.gpus);
        if spec.is_allocated() {
            demand[spec.leaf.0 as usize].add(spec.submitted_at, until, gpus);
        }
        let wait = j.first_start.unwrap_or(horizon) - spec.submitted_at;
        waits.push(wait);
        let is_debug = spec.is_debug();
        if is_debug {
            debug.push(wait);
        }
        if spec.gpus > node_size {
            large.push(wait);
            let t = &mut team_waits[spec.leaf.0 as usize][0];
            *t = (t.0 + wait as f64, t.1 + 1);
        } else if spec.is_allocated() && !is_debug {
            let t = &mut team_waits[spec.leaf.0 as usize][1];
            *t = (t.0 + wait as f64, t.1 + 1);
        }
    }
    let large_over_single_wait = team_waits
        .iter()
        .filter(|[l, s]| l.1 >= 5 && s.1 >= 5)
        .map(|[l, s]| round6((l.0 / l.1 as f64) / (s.0 / s.1 as f64).max(60.0)))
        .reduce(f64::max);
    let mut runs: BTreeMap<(u32, Time), (Time, bool, SegmentEnd)> = BTreeMap::new();
    for s in &out.segments {
        runs.insert((s.job, s.start), (s.end, s.allocated, s.end_kind));
    }
    let zero_length_runs = runs
        .iter()
        .filter(|(k, v)| v.0 == k.1 && v.2 != SegmentEnd::Running)
        .count() as u64;
    let free_runs_under_a_minute = runs
        .iter()
        .filter(|(k, v)| {
            !v.1 && v.0 - k.1 < 60 && matches!(v.2, SegmentEnd::Preempted | SegmentEnd::Killed)
        })
        .count() as u64;
    let (all_demand, occupancy_limit_s) = offered(input, horizon);
    let rigid_busy_s = super::rigid::rigid_greedy_busy(input, horizon);
    for v in [&mut waits, &mut debug, &mut large] {
        v.sort_unstable();
    }

    // Sum leaves' hours up the tree; owed is each node's own allocation capped by its own demand.
    let hours = capacity.values.len();
    let mut node_charged = vec![vec![0.0; hours]; leaves];
    let mut node_demand = vec![vec![0.0; hours]; leaves];
    let mut node_free = vec![0.0; leaves];
    for leaf in tree.leaves() {
        let mut at = Some(leaf);
        while let Some(node) = at {
            let (n, l) = (node.0 as usize, leaf.0 as usize);
            for h in 0..hours {
                node_charged[n][h] += charged[l].values[h];
                node_demand[n][h] += demand[l].values[h];
            }
            node_free[n] += free_gpu_s[l];
            at = tree.parent(node);
        }
    }
    let shares = tree.latest();
    let mut nodes = Vec::with_capacity(leaves);
    let (mut team_owed, mut team_met, mut team_hourly) = (0.0, 0.0, 0.0);
    let (mut teams, mut at_95, mut worst) = (0u64, 0u64, None::<f64>);
    for id in tree.ids() {
        let n = id.0 as usize;
        let fraction = shares.fraction(id);
        let (mut owed, mut hourly_met) = (0.0, 0.0);
        for h in 0..hours {
            let owed_h = (fraction * capacity.values[h]).min(node_demand[n][h]);
            owed += owed_h;
            hourly_met += node_charged[n][h].min(owed_h);
        }
        let delivered: f64 = node_charged[n].iter().sum();
        let ratio = (owed > 0.0).then(|| delivered / owed);
        if tree.is_leaf(id) {
            if let Some(r) = ratio {
                teams += 1;
                team_owed += owed;
                team_met += delivered.min(owed);
                team_hourly += hourly_met;
                if r >= 0.95 {
                    at_95 += 1;
                }
                worst = Some(worst.map_or(r, |w| w.min(r)));
            }
        }
        nodes.push(NodeReport {
            path: tree.path(id).to_string(),
            fraction: round6(fraction),
            owed_gpu_h: round6(owed / 3_600.0),
            delivered_gpu_h: round6(delivered / 3_600.0),
            charged_gpu_h: round6(out.engine.ledger().charged_total(id, horizon) / 3_600.0),
            unallocated_gpu_h: round6(node_free[n] / 3_600.0),
            delivered_over_owed: ratio.map(round6),
        });
    }

    let healthy = capacity.total();
    let share_of = |a: f64, b: f64| if b > 0.0 { round6(a / b) } else { 0.0 };
    let by_reason: BTreeMap<String, u64> = out
        .by_reason
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    Report {
        policy: policy.name().into(),
        horizon_s: horizon,
        gpus: cluster.total_gpus(),
        wall_s: 0.0,
        workloads,
        occupancy: share_of(busy, healthy),
        unallocated_fraction: share_of(busy_free, busy),
        preemptions: by_reason.values().sum(),
        wait_s: Waits {
            all: WaitStats::of_sorted(&waits),
            debug: WaitStats::of_sorted(&debug),
            large: WaitStats::of_sorted(&large),
        },
        delivered_over_owed: DeliveredOverOwed {
            overall: (team_owed > 0.0).then(|| round6(team_met / team_owed)),
            min: worst.map(|w| round6(w.min(1.0))),
            teams,
            teams_at_95pct: at_95,
            hourly: (team_owed > 0.0).then(|| round6(team_hourly / team_owed)),
        },
        nodes,
        preemptions_by_reason: by_reason,
        lost_gpu_h_by_reason: out
            .lost_by_reason
            .iter()
            .map(|(k, v)| (k.to_string(), round6(v / 3_600.0)))
            .collect(),
        requeue_wait_s: WaitStats::of_sorted(&out.requeue_waits),
        demand_over_capacity: share_of(all_demand, healthy),
        occupancy_limit: share_of(occupancy_limit_s, healthy),
        occupancy_rigid: share_of(rigid_busy_s, healthy),
        idle_while_waiting: share_of(out.idle_while_waiting, healthy),
        lost_gpu_h: round6(lost / 3_600.0),
        lost_fraction: share_of(lost, busy),
        lost_to_preemption: LostByClass {
            allocated_gpu_h: round6(out.lost_to_preemption[0] / 3_600.0),
            free_gpu_h: round6(out.lost_to_preemption[1] / 3_600.0),
            allocated_fraction: share_of(out.lost_to_preemption[0], busy),
            free_fraction: share_of(out.lost_to_preemption[1], busy),
        },
        zero_length_runs,
        free_runs_under_a_minute,
        kill_margin: (policy == Policy::FairShare).then_some(config.kill_margin),
        time_limits: (policy == Policy::Slurm).then_some(TimeLimits {
            factor: config.time_limit_factor,
            max_wall_s: config.slurm.max_wall,
            priority_calc_period_s: config.slurm.calc_period,
        }),
        large_over_single_wait,
        min_runtime_capped: out.capped,
        decisions: out.decisions,
    }
}

/// From the input alone: the GPU-seconds the trace asks for by the horizon, and the GPU-seconds a
/// work-conserving cluster would have been busy if work were divisible — a fluid queue of every
/// submitted GPU-second, served at the healthy capacity whenever it is not empty.
fn offered(input: &SimInput, horizon: Time) -> (f64, f64) {
    let cluster = &input.cluster;
    let total = f64::from(cluster.total_gpus());
    // (time, GPU-seconds arriving, change in healthy GPUs)
    let mut events: Vec<(Time, f64, f64)> = Vec::new();
    let mut asked = 0.0;
    for r in input.trace.iter().filter(|r| r.submit <= horizon) {
        let work = f64::from(r.gpus) * r.duration as f64;
        asked += work;
        events.push((r.submit.max(0), work, 0.0));
    }
    for o in &cluster.outages {
        let gpus = f64::from(cluster.nodes[o.node.0 as usize].gpus);
        events.push((o.from.clamp(0, horizon), 0.0, -gpus));
        events.push((o.to.clamp(0, horizon), 0.0, gpus));
    }
    events.push((horizon, 0.0, 0.0));
    events.sort_by_key(|e| e.0);
    let (mut backlog, mut served, mut capacity, mut t) = (0.0f64, 0.0f64, total, 0);
    for (at, work, change) in events {
        let span = (at.min(horizon) - t).max(0) as f64;
        let done = backlog.min(capacity.max(0.0) * span);
        backlog -= done;
        served += done;
        t = t.max(at.min(horizon));
        backlog += work;
        capacity += change;
    }
    (asked, served)
}
