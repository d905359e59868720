//! Properties over random clusters, trees, ledgers and queues, for both policies.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use scheduler::*;

const MIN_RUNTIMES: [Time; 3] = [0, 600, 2 * HOUR];

#[derive(Clone, Debug)]
struct Case {
    programs: Vec<(u8, Vec<u8>)>,
    history: Vec<u16>,
    nodes: Vec<(u32, u8)>,
    running: Vec<(u8, u8, u8, i64, bool, i32, u8)>,
    queued: Vec<(u8, u32, u8, bool, i32, i64)>,
    margin: f64,
    reservations: usize,
    /// The fast lane's peak, and the debug runs that ended before now: `(GPUs, start, length)`,
    /// in minutes before now (some before the lane's hour).
    lane: (f64, Vec<(u8, i64, i64)>),
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0u8..4, prop::collection::vec(0u8..4, 1..4)), 1..4),
        prop::collection::vec(0u16..800, 12),
        prop::collection::vec((prop::sample::select(vec![1u32, 2, 4, 8]), 0u8..10), 1..6),
        prop::collection::vec(
            (
                any::<u8>(),
                0u8..5,
                0u8..3,
                0i64..10,
                any::<bool>(),
                -1i32..2,
                any::<u8>(),
            ),
            0..24,
        ),
        prop::collection::vec(
            (
                any::<u8>(),
                prop::sample::select(vec![1u32, 1, 2, 3, 4, 8, 16]),
                0u8..3,
                any::<bool>(),
                -1i32..2,
                0i64..4,
            ),
            0..16,
        ),
        prop::sample::select(vec![0.0, 0.02, 0.3]),
        0usize..3,
        (
            prop::sample::select(vec![0.2, 1.0]),
            prop::collection::vec((1u8..9, 0i64..120, 1i64..60), 0..6),
        ),
    )
        .prop_map(
            |(programs, history, nodes, running, queued, margin, reservations, lane)| Case {
                programs,
                history,
                nodes,
                running,
                queued,
                margin,
                reservations,
                lane,
            },
        )
}

struct Built {
    engine: Engine,
    nodes: Vec<NodeState>,
    running: Vec<RunningWorkload>,
    queued: Vec<WorkloadSpec>,
    ended_debug: Vec<EndedRun>,
}

impl Built {
    fn state(&self) -> ClusterState<'_> {
        ClusterState {
            nodes: &self.nodes,
            running: &self.running,
            queued: &self.queued,
            ended_debug: &self.ended_debug,
        }
    }
}

fn build(case: &Case, policy: Policy, reservations: usize) -> Built {
    let mut shares = Vec::new();
    for (p, (share, leaves)) in case.programs.iter().enumerate() {
        shares.push((format!("p{p}"), f64::from(*share)));
        for (l, leaf_share) in leaves.iter().enumerate() {
            shares.push((format!("p{p}/l{l}"), f64::from(*leaf_share)));
        }
    }
    let tree = BudgetTree::from_paths(shares).expect("generated trees are valid");
    let leaves: Vec<BudgetId> = tree.leaves().collect();
    let config = Config {
        policy,
        damping_margin: case.margin,
        max_reservations: reservations,
        fast_lane_peak: case.lane.0,
        ..Config::default()
    };
    let mut engine = Engine::new(tree, config);
    let nodes: Vec<NodeState> = case
        .nodes
        .iter()
        .map(|&(gpus, h)| NodeState {
            gpus,
            health: match h {
                7 => Health::Cordoned,
                8 => Health::Unhealthy,
                9 => Health::Down,
                _ => Health::Healthy,
            },
        })
        .collect();
    let capacity: u32 = nodes.iter().map(|n| n.gpus).sum();
    engine.ledger_mut().set_capacity(-7 * DAY, capacity);
    for (leaf, hours) in leaves.iter().zip(&case.history) {
        engine
            .ledger_mut()
            .charge(*leaf, -DAY, 0, f64::from(*hours) * 3_600.0);
    }

    let mut free: Vec<GpuSet> = nodes.iter().map(|n| GpuSet::first(n.gpus)).collect();
    let largest = nodes.iter().map(|n| n.gpus).max().unwrap_or(1);
    let mut next_id = 1;
    let mut running = Vec::new();
    for &(leaf, size, min, ago, resumable, priority, at) in &case.running {
        let gpus = [1, 1, 2, 4, 16][size as usize];
        let spec = WorkloadSpec {
            id: WorkloadId(next_id),
            leaf: leaves[leaf as usize % leaves.len()],
            gpus,
            min_runtime: MIN_RUNTIMES[min as usize],
            resumable,
            priority,
            submitted_at: -10 * HOUR,
            // Read by the SLURM peer alone: runs whose limits end at different moments.
            time_limit: Some(HOUR * (1 + (ago + i64::from(at)) % 12)),
        };
        let mut parts = Vec::new();
        if gpus <= largest {
            let n = nodes.len();
            if let Some(node) = (0..n)
                .map(|k| (at as usize + k) % n)
                .find(|&i| free[i].count() >= gpus)
            {
                parts.push(NodeGpus {
                    node: NodeId(node as u32),
                    gpus: free[node].lowest(gpus),
                });
            }
        } else {
            let mut total = 0;
            for (i, node) in nodes.iter().enumerate() {
                if total < gpus && free[i] == GpuSet::first(node.gpus) {
                    total += node.gpus;
                    parts.push(NodeGpus {
                        node: NodeId(i as u32),
                        gpus: free[i],
                    });
                }
            }
            if total < gpus {
                parts.clear();
            }
        }
        if parts.is_empty() {
            continue;
        }
        for part in &parts {
            free[part.node.0 as usize] = free[part.node.0 as usize].without(part.gpus);
        }
        next_id += 1;
        let placement = Placement { parts };
        let started_at = -ago * 1_800 - 1;
        if spec.is_allocated() {
            engine
                .ledger_mut()
                .start_charging(spec.leaf, placement.gpu_count(), started_at);
        }
        let baseline_protected = spec.is_allocated() && at % 2 == 0;
        running.push(RunningWorkload {
            spec,
            started_at,
            placement,
            baseline_protected,
        });
    }
    let queued = case
        .queued
        .iter()
        .map(|&(leaf, gpus, min, resumable, priority, ago)| {
            next_id += 1;
            WorkloadSpec {
                id: WorkloadId(next_id),
                leaf: leaves[leaf as usize % leaves.len()],
                gpus,
                min_runtime: MIN_RUNTIMES[min as usize],
                resumable,
                priority,
                submitted_at: -ago * 600,
                time_limit: Some((1 + ago % 6) * 1_800 + i64::from(gpus) * 600),
            }
        })
        .collect();
    let ended_debug = case
        .lane
        .1
        .iter()
        .map(|&(gpus, start, length)| EndedRun {
            gpus: u32::from(gpus),
            started_at: -start * 60,
            ended_at: (-start + length).min(0) * 60,
        })
        .collect();
    Built {
        engine,
        nodes,
        running,
        queued,
        ended_debug,
    }
}

/// Applies a decision and checks its basic soundness; returns who holds each GPU afterwards.
fn apply(b: &Built, d: &Decision) -> Result<BTreeMap<(u32, u32), WorkloadId>, TestCaseError> {
    let mut acted = BTreeSet::new();
    let mut holder: BTreeMap<(u32, u32), WorkloadId> = BTreeMap::new();
    let stopped: BTreeSet<WorkloadId> = d
        .actions
        .iter()
        .filter(|a| !matches!(a, Action::Start { .. }))
        .map(|a| a.workload())
        .collect();
    for run in b.running.iter().filter(|r| !stopped.contains(&r.spec.id)) {
        for part in &run.placement.parts {
            for g in part.gpus.indices() {
                holder.insert((part.node.0, g), run.spec.id);
            }
        }
    }
    for action in &d.actions {
        prop_assert!(
            acted.insert(action.workload()),
            "one action per workload: {:?}",
            action
        );
        match action {
            Action::Start {
                workload,
                placement,
                ..
            } => {
                let spec = b.queued.iter().find(|q| q.id == *workload);
                prop_assert!(spec.is_some(), "only queued work starts");
                prop_assert!(placement.gpu_count() >= spec.unwrap().gpus);
                for part in &placement.parts {
                    let node = b.nodes[part.node.0 as usize];
                    prop_assert_eq!(
                        node.health,
                        Health::Healthy,
                        "new work only on healthy hosts"
                    );
                    prop_assert!(part.gpus.without(GpuSet::first(node.gpus)).is_empty());
                    for g in part.gpus.indices() {
                        let before = holder.insert((part.node.0, g), *workload);
                        prop_assert!(before.is_none(), "GPU {:?} double-booked", (part.node, g));
                    }
                }
            }
            _ => prop_assert!(
                b.running.iter().any(|r| r.spec.id == action.workload()),
                "only running work stops"
            ),
        }
    }
    Ok(holder)
}

fn check_protection(b: &Built, d: &Decision, policy: Policy) -> Result<(), TestCaseError> {
    let now = 0;
    for action in &d.actions {
        let run = || {
            b.running
                .iter()
                .find(|r| r.spec.id == action.workload())
                .expect("running")
        };
        let protected = |r: &RunningWorkload| match policy {
            Policy::FairShare => r.is_protected(now),
            Policy::Priority | Policy::Slurm => r.baseline_protected,
        };
        match action {
            Action::Preempt { reason, .. } => {
                prop_assert!(!protected(run()), "protected work preempted: {:?}", reason);
                let preemptor = b
                    .queued
                    .iter()
                    .find(|q| q.id == reason.preemptor.workload)
                    .expect("queued");
                prop_assert!(preemptor.is_allocated(), "free work never preempts");
                let starts_too = d.actions.iter().any(
                    |a| matches!(a, Action::Start { workload, .. } if *workload == preemptor.id),
                );
                prop_assert!(starts_too, "a preemptor starts in the same decision");
            }
            Action::Drain { reason, .. } => {
                prop_assert!(
                    reason.rule == DrainRule::HostDown || !protected(run()),
                    "protected work drained early"
                );
            }
            Action::Start { .. } => {}
        }
    }
    Ok(())
}

/// No allocated workload left waiting would fit on GPUs that are idle or held by free work.
fn check_free_work_never_blocks(
    b: &Built,
    d: &Decision,
    holder: &BTreeMap<(u32, u32), WorkloadId>,
) -> Result<(), TestCaseError> {
    let started: BTreeSet<WorkloadId> = d
        .actions
        .iter()
        .filter(|a| matches!(a, Action::Start { .. }))
        .map(|a| a.workload())
        .collect();
    let allocated: BTreeSet<WorkloadId> = b
        .running
        .iter()
        .map(|r| &r.spec)
        .chain(&b.queued)
        .filter(|s| s.is_allocated())
        .map(|s| s.id)
        .collect();
    let reserved: BTreeSet<(u32, u32)> = d
        .reservations
        .iter()
        .flat_map(|r| {
            r.gpus
                .iter()
                .flat_map(|p| p.gpus.indices().map(move |g| (p.node.0, g)))
        })
        .collect();
    let open: Vec<(u32, u32)> = b
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let i = i as u32;
            let open = (0..n.gpus)
                .filter(|&g| n.health == Health::Healthy && !reserved.contains(&(i, g)))
                .filter(|&g| holder.get(&(i, g)).is_none_or(|w| !allocated.contains(w)))
                .count() as u32;
            (open, n.gpus)
        })
        .collect();
    let largest = b.nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
    for w in b
        .queued
        .iter()
        .filter(|q| q.is_allocated() && !started.contains(&q.id))
    {
        let fits = if w.gpus <= largest {
            open.iter().any(|&(o, _)| o >= w.gpus)
        } else {
            open.iter()
                .filter(|&&(o, all)| o == all)
                .map(|&(_, all)| all)
                .sum::<u32>()
                >= w.gpus
        };
        prop_assert!(
            !fits,
            "workload {:?} waits though idle or free GPUs fit it: {:?}",
            w,
            d
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_gpu_is_double_booked_and_no_protected_workload_is_preempted(case in case()) {
        for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
            let b = build(&case, policy, case.reservations);
            let d = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            apply(&b, &d)?;
            check_protection(&b, &d, policy)?;
            if let Some(wake) = d.next_wake {
                prop_assert!(wake > 0);
            }
        }
    }

    #[test]
    fn an_unallocated_workload_never_blocks_an_allocated_one_that_fits_after_preempting_it(case in case()) {
        for reservations in [0, case.reservations] {
            let mut b = build(&case, Policy::FairShare, reservations);
            // The debug headroom holds funded work back from idle GPUs by design (DESIGN §4.11).
            let config = Config { headroom_gpus: 0, ..*b.engine.config() };
            b.engine.set_config(config);
            let d = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            let holder = apply(&b, &d)?;
            check_free_work_never_blocks(&b, &d, &holder)?;
        }
    }

    #[test]
    fn the_baseline_decides_as_if_it_walked_its_whole_queue_in_order(case in case()) {
        for reservations in [0, case.reservations] {
            let b = build(&case, Policy::Priority, reservations);
            let lazy = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            let full = b.engine.baseline_by_full_walk(&b.state(), 0).expect("valid snapshot");
            prop_assert_eq!(lazy, full);
        }
    }

    #[test]
    fn fair_share_decides_as_if_it_searched_for_every_request_the_headroom_holds_back(case in case()) {
        for reservations in [0, case.reservations] {
            let mut b = build(&case, Policy::FairShare, reservations);
            // A headroom on these small clusters too (at most a tenth of the GPUs, the lane's).
            let config = Config {
                headroom_max_fraction: 1.0,
                ..*b.engine.config()
            };
            b.engine.set_config(config);
            let lazy = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            let full = b.engine.fair_share_without_shortcuts(&b.state(), 0).expect("valid snapshot");
            prop_assert_eq!(lazy, full);
        }
    }

    #[test]
    fn the_slurm_peer_decides_as_if_it_walked_its_whole_queue_with_every_search(case in case()) {
        let b = build(&case, Policy::Slurm, case.reservations);
        let lazy = b.engine.decide(&b.state(), 0).expect("valid snapshot");
        let full = b.engine.slurm_by_full_walk(&b.state(), 0).expect("valid snapshot");
        prop_assert_eq!(lazy, full);
    }

    #[test]
    fn the_same_input_gives_the_same_actions_in_any_order(case in case()) {
        for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
            let mut b = build(&case, policy, case.reservations);
            let first = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            prop_assert_eq!(&first, &b.engine.decide(&b.state(), 0).unwrap());
            b.running.reverse();
            b.queued.reverse();
            prop_assert_eq!(&first, &b.engine.decide(&b.state(), 0).unwrap());
            for q in b.queued.iter().take(3) {
                let e = b.engine.explain(&b.state(), 0, q.id).unwrap().expect("queued");
                prop_assert!(e.position >= 1 && e.position <= b.queued.len());
            }
        }
    }

    #[test]
    fn explaining_a_workload_never_changes_the_pass_that_explains_it(case in case()) {
        for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
            let b = build(&case, policy, case.reservations);
            let plain = b.engine.decide(&b.state(), 0).expect("valid snapshot");
            for q in &b.queued {
                let watched = b.engine.decide_watching(&b.state(), 0, q.id).expect("valid snapshot");
                prop_assert_eq!(&plain, &watched, "watching {:?}", q.id);
            }
        }
    }

    #[test]
    fn charged_time_is_conserved_up_the_tree(
        case in case(),
        ops in prop::collection::vec((any::<u8>(), 0u8..3, 1u32..16, 0i64..20_000), 1..60),
    ) {
        let b = build(&case, Policy::FairShare, 0);
        let mut engine = b.engine;
        let leaves: Vec<BudgetId> = engine.tree().leaves().collect();
        let mut open: Vec<(BudgetId, u32)> = Vec::new();
        let mut now = 0;
        for (leaf, kind, gpus, dt) in ops {
            now += dt;
            let leaf = leaves[leaf as usize % leaves.len()];
            match kind {
                0 => engine.ledger_mut().charge(leaf, now - dt, now, f64::from(gpus) * dt as f64),
                1 => {
                    engine.ledger_mut().start_charging(leaf, gpus, now);
                    open.push((leaf, gpus));
                }
                _ => {
                    if let Some((leaf, gpus)) = open.pop() {
                        engine.ledger_mut().stop_charging(leaf, gpus, now);
                    }
                }
            }
            let ledger = engine.ledger();
            let tree = engine.tree();
            for id in tree.ids().filter(|&id| !tree.is_leaf(id)) {
                let children: f64 = tree.children(id).iter().map(|&c| ledger.usage(c, now)).sum();
                let own = ledger.usage(id, now);
                prop_assert!((own - children).abs() <= 1e-6 * own.max(1.0), "{} {} vs {}", tree.path(id), own, children);
                let total: f64 = tree.children(id).iter().map(|&c| ledger.charged_total(c, now)).sum();
                let own_total = ledger.charged_total(id, now);
                prop_assert!((own_total - total).abs() <= 1e-6 * own_total.max(1.0));
            }
        }
    }
}
