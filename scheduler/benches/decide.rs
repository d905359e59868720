//! One decision pass on a busy cluster: 1,024 GPUs / 10,000 queued (the target: < 2 ms),
//! and 4,096 GPUs / 40,000 queued to show growth.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use scheduler::*;

/// SplitMix64: a seeded generator, so every run benchmarks the same input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

struct Scenario {
    engine: Engine,
    nodes: Vec<NodeState>,
    running: Vec<RunningWorkload>,
    queued: Vec<WorkloadSpec>,
}

/// 3 programs × 5 groups × 10 projects = 150 leaves under the root: a 4-level tree.
fn scenario(node_count: usize, running_target: usize, queued_count: usize) -> Scenario {
    let mut rng = Rng(0x5EED);
    let mut shares = Vec::new();
    for p in 0..3 {
        shares.push((format!("prog{p}"), (1 + rng.below(5)) as f64));
        for g in 0..5 {
            shares.push((format!("prog{p}/group{g}"), (1 + rng.below(5)) as f64));
            for l in 0..10 {
                shares.push((
                    format!("prog{p}/group{g}/proj{l}"),
                    (1 + rng.below(9)) as f64,
                ));
            }
        }
    }
    let tree = BudgetTree::from_paths(shares).unwrap();
    let leaves: Vec<BudgetId> = tree.leaves().collect();
    let mut engine = Engine::new(tree, Config::default());
    let gpus = node_count as u32 * 8;
    let now = 30 * DAY;
    engine.ledger_mut().set_capacity(now - 8 * DAY, gpus);
    for &leaf in &leaves {
        let hours = rng.below(u64::from(gpus) * 168 / 100) as f64;
        engine
            .ledger_mut()
            .charge(leaf, now - 7 * DAY, now - HOUR, hours * 3_600.0);
    }
    let nodes = vec![
        NodeState {
            gpus: 8,
            health: Health::Healthy
        };
        node_count
    ];

    let mut running = Vec::new();
    let mut id = 0u64;
    let mut spec = |rng: &mut Rng, gpus: u32| {
        id += 1;
        WorkloadSpec {
            id: WorkloadId(id),
            leaf: rng.pick(&leaves),
            gpus,
            min_runtime: rng.pick(&[0, 15 * 60, HOUR, 2 * HOUR, 8 * HOUR, HOUR]),
            resumable: rng.below(4) != 0,
            priority: rng.below(3) as i32 - 1,
            submitted_at: now - rng.below(2 * DAY as u64) as i64,
            time_limit: None,
        }
    };
    // A tenth of the hosts run two-host gangs; the rest are packed with small work.
    let gang_hosts = node_count / 10 / 2 * 2;
    for first in (0..gang_hosts).step_by(2) {
        let s = spec(&mut rng, 16);
        let placement = Placement {
            parts: (first..first + 2)
                .map(|n| NodeGpus {
                    node: NodeId(n as u32),
                    gpus: GpuSet::first(8),
                })
                .collect(),
        };
        running.push(RunningWorkload {
            spec: s,
            started_at: now - rng.below(8 * HOUR as u64) as i64,
            placement,
            baseline_protected: false,
        });
    }
    'hosts: for node in gang_hosts..node_count {
        let mut used = 0;
        while used < 8 {
            if running.len() >= running_target {
                break 'hosts;
            }
            let size = rng.pick(&[1, 1, 1, 2, 2]).min(8 - used);
            let s = spec(&mut rng, size);
            let gpus = GpuSet::first(used + size).without(GpuSet::first(used));
            running.push(RunningWorkload {
                spec: s,
                started_at: now - rng.below(8 * HOUR as u64) as i64,
                placement: Placement::on(NodeId(node as u32), gpus),
                baseline_protected: false,
            });
            used += size;
        }
    }
    for r in &running {
        if r.spec.is_allocated() {
            engine
                .ledger_mut()
                .start_charging(r.spec.leaf, r.placement.gpu_count(), r.started_at);
        }
    }
    let queued = (0..queued_count)
        .map(|_| {
            let gpus = rng.pick(&[1, 1, 1, 2, 4, 8, 8, 16, 32]);
            spec(&mut rng, gpus)
        })
        .collect();
    Scenario {
        engine,
        nodes,
        running,
        queued,
    }
}

/// Applies a decision the way a driver would, so the next pass sees a settled cluster.
fn apply(s: &mut Scenario, d: &Decision, now: Time) {
    for action in &d.actions {
        match action {
            Action::Start {
                workload,
                placement,
                ..
            } => {
                let at = s.queued.iter().position(|q| q.id == *workload).unwrap();
                let spec = s.queued.swap_remove(at);
                if spec.is_allocated() {
                    s.engine
                        .ledger_mut()
                        .start_charging(spec.leaf, placement.gpu_count(), now);
                }
                s.running.push(RunningWorkload {
                    spec,
                    started_at: now,
                    placement: placement.clone(),
                    baseline_protected: false,
                });
            }
            Action::Preempt { workload, then, .. } | Action::Drain { workload, then, .. } => {
                let at = s
                    .running
                    .iter()
                    .position(|r| r.spec.id == *workload)
                    .unwrap();
                let run = s.running.swap_remove(at);
                if run.spec.is_allocated() {
                    s.engine.ledger_mut().stop_charging(
                        run.spec.leaf,
                        run.placement.gpu_count(),
                        now,
                    );
                }
                if *then == AfterStop::Requeue {
                    s.queued.push(run.spec);
                }
            }
        }
    }
}

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    for (nodes, running, queued) in [(128, 600, 10_000), (512, 2_400, 40_000)] {
        let now = 30 * DAY;
        let mut s = scenario(nodes, running, queued);
        // Cold: a random snapshot, where hundreds of preemptions are due at once.
        let state = ClusterState {
            nodes: &s.nodes,
            running: &s.running,
            queued: &s.queued,
            ended_debug: &[],
        };
        let cold = s.engine.decide(&state, now).unwrap();
        let label = format!("{}gpus_{}queued", nodes * 8, queued);
        eprintln!(
            "{label} cold: {} running, {} actions",
            s.running.len(),
            cold.actions.len()
        );
        group.bench_function(BenchmarkId::new("cold", &label), |b| {
            b.iter(|| black_box(s.engine.decide(black_box(&state), now).unwrap()))
        });
        // Steady: the same cluster a minute after that decision was applied, a typical wake-up.
        apply(&mut s, &cold, now);
        let later = now + 60;
        let state = ClusterState {
            nodes: &s.nodes,
            running: &s.running,
            queued: &s.queued,
            ended_debug: &[],
        };
        let steady = s.engine.decide(&state, later).unwrap();
        eprintln!(
            "{label} steady: {} running, {} actions",
            s.running.len(),
            steady.actions.len()
        );
        group.bench_function(BenchmarkId::new("steady", &label), |b| {
            b.iter(|| black_box(s.engine.decide(black_box(&state), later).unwrap()))
        });
        // Why a workload waits, as its page asks: the pass that explains one of them.
        let watched = s.queued[s.queued.len() / 2].id;
        group.bench_function(BenchmarkId::new("explain", &label), |b| {
            b.iter(|| black_box(s.engine.explain(black_box(&state), later, watched).unwrap()))
        });
        // The pages' start projection from that snapshot, bounded as the server bounds it.
        let limits = Limits::for_workloads(s.running.len() + s.queued.len());
        let projection = project(&s.engine, &state, later, |_| 2 * HOUR, limits).unwrap();
        eprintln!(
            "{label} projection: {} moments at most, {} of {} queued start by +{} h",
            limits.moments,
            projection.started(),
            s.queued.len(),
            (projection.until - later) / HOUR
        );
        group.bench_function(BenchmarkId::new("projection", &label), |b| {
            b.iter(|| black_box(project(&s.engine, &state, later, |_| 2 * HOUR, limits).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
