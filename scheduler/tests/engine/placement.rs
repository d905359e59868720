//! DESIGN §4.8: best fit, whole-host gangs, reservations with backfill, and explanations.

use scheduler::*;

use crate::support::{preempted, starts, World};

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

#[test]
fn small_workload_takes_the_best_fitting_node() {
    let mut w = World::new(TWO_TEAMS, 3, 8);
    w.running("a", HOUR, 0, 1, &[0, 1, 2, 3, 4]);
    w.running("a", HOUR, 0, 2, &[0, 1, 2, 3, 4, 5]);
    let two = w.submit("a", 2, HOUR);
    let decision = w.step();
    assert_eq!(
        starts(&decision),
        [(two, &Placement::on(NodeId(2), GpuSet::of(&[6, 7])))]
    );
    let three = w.submit("a", 3, HOUR);
    let decision = w.decide();
    assert_eq!(
        starts(&decision),
        [(three, &Placement::on(NodeId(1), GpuSet::of(&[5, 6, 7])))]
    );
}

#[test]
fn large_workload_takes_whole_nodes() {
    let mut w = World::new(TWO_TEAMS, 3, 8);
    w.running("a", HOUR, 0, 1, &[0]);
    let gang = w.submit("a", 16, HOUR);
    let decision = w.decide();
    let placement = Placement {
        parts: vec![
            NodeGpus {
                node: NodeId(0),
                gpus: GpuSet::first(8),
            },
            NodeGpus {
                node: NodeId(2),
                gpus: GpuSet::first(8),
            },
        ],
    };
    assert_eq!(starts(&decision), [(gang, &placement)]);
}

#[test]
fn gang_preempts_whole_nodes_of_lower_ranked_work() {
    let mut w = World::new(TWO_TEAMS, 3, 8);
    w.history("b", 1_000.0);
    let mut victims = Vec::new();
    for node in 0..3 {
        for half in [[0, 1, 2, 3], [4, 5, 6, 7]] {
            victims.push(w.running("b", HOUR, -2 * HOUR + i64::from(node) * 60, node, &half));
        }
    }
    // Resumable work loses no progress when stopped; the work that has run longest past its
    // protection goes first (node 0's, then node 1's), and node 2's, just out of it, stays.
    let gang = w.submit("a", 16, HOUR);
    let decision = w.decide();
    assert_eq!(preempted(&decision), victims[..4].to_vec());
    let (started, placement) = starts(&decision)[0];
    assert_eq!(started, gang);
    assert_eq!(
        placement.nodes().collect::<Vec<_>>(),
        [NodeId(0), NodeId(1)]
    );
}

/// Four hosts busy with a stream of short protected jobs from an over-served team; an under-served
/// team submits a gang needing all of them. Returns how long the gang waited, if it started.
fn gang_wait(max_reservations: usize) -> Option<Time> {
    let config = Config {
        max_reservations,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 4, 8, config);
    w.history("b", 2_000.0);
    let job = |w: &mut World, i: i64| {
        let id = w.submit("b", 1, 15 * 60);
        w.remaining.insert(id, 20 * 60 + (i * 7 % 20) * 60);
    };
    for i in 0..32 {
        job(&mut w, i);
    }
    w.step();
    let mut gang = None;
    let mut i = 32;
    while w.now < 8 * HOUR {
        w.advance_to(w.now + 30);
        job(&mut w, i);
        i += 1;
        // By now the short jobs' starts (and protections) are spread out.
        if w.now == 2 * HOUR {
            let id = w.submit("a", 32, HOUR);
            gang = Some((id, w.now));
        }
        let decision = w.step();
        if let Some((id, submitted)) = gang {
            if starts(&decision).iter().any(|s| s.0 == id) {
                return Some(w.now - submitted);
            }
        }
    }
    None
}

#[test]
fn large_gang_is_not_starved_by_stream_of_small_jobs() {
    let wait = gang_wait(Config::default().max_reservations).expect("the gang starts");
    assert!(
        wait <= 16 * 60,
        "it waits at most one short job's protection: {wait} s"
    );
}

#[test]
fn without_reservations_the_same_gang_starves() {
    assert_eq!(gang_wait(0), None);
}

#[test]
fn backfill_uses_reserved_gpus_only_when_it_will_be_preemptible_in_time() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.history("b", 400.0);
    w.running("b", 2 * HOUR, 0, 0, &[0, 1, 2, 3, 4, 5]);
    w.running("b", 2 * HOUR, 0, 1, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let gang = w.submit("a", 16, HOUR);
    let long = w.submit("b", 1, 3 * HOUR);
    let short = w.submit("b", 1, HOUR);
    // Free work is preemptible at once, but non-resumable work would lose its progress there.
    let mut final_free = w.spec("b", 1, 0);
    final_free.resumable = false;
    w.submit_spec(final_free);
    let free = w.submit("b", 1, 0);
    let decision = w.decide();
    assert_eq!(decision.reservations.len(), 1);
    assert_eq!(
        (
            decision.reservations[0].workload,
            decision.reservations[0].at
        ),
        (gang, 2 * HOUR)
    );
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [short, free]);
    assert_eq!(
        w.explain(long).waiting_for,
        WaitReason::ReservedAhead {
            holder: gang,
            at: 2 * HOUR
        }
    );
    assert!(
        matches!(w.explain(gang).waiting_for, WaitReason::OwnReservation { at, .. } if at == 2 * HOUR)
    );
}

/// A reserving gang judges a host by who holds it, in bits of the tree's nodes up to 64; past
/// them it reads the host's runs. Either way its own team's work that cannot resume keeps it off
/// that host for good, and other teams' work only until its protection ends.
#[test]
fn a_gang_of_a_team_past_the_64th_node_of_the_tree_reserves_around_its_own_final_work() {
    // Teams x and y come after 70 quiet ones, whichever way the tree numbers its nodes.
    let names: Vec<String> = (0..70).map(|i| format!("q{i:02}")).collect();
    let mut shares: Vec<(&str, f64)> = names.iter().map(|n| (n.as_str(), 0.01)).collect();
    shares.extend([("x", 1.0), ("y", 1.0)]);
    let small: &[(&str, f64)] = &[("x", 1.0), ("y", 1.0)];
    for shares in [small, &shares[..]] {
        let mut w = World::new(shares, 3, 8);
        assert_eq!(w.leaf("x").0 >= 64, shares.len() > 64);
        w.history("y", 400.0);
        let mut own = w.spec("x", 1, HOUR);
        own.resumable = false;
        w.place(own, 0, &[(0, &[0])]);
        w.running("y", 2 * HOUR, 0, 1, &[0, 1, 2, 3, 4, 5, 6, 7]);
        w.running("y", 3 * HOUR, 0, 2, &[0, 1, 2, 3, 4, 5, 6, 7]);
        // Host 0 is out of its protection first, but never the gang's.
        let gang = w.submit("x", 16, HOUR);
        let decision = w.decide();
        let held: Vec<(WorkloadId, Time, Vec<NodeId>)> = decision
            .reservations
            .iter()
            .map(|r| (r.workload, r.at, r.gpus.iter().map(|p| p.node).collect()))
            .collect();
        assert_eq!(held, [(gang, 3 * HOUR, vec![NodeId(1), NodeId(2)])]);
    }
}

#[test]
fn beside_a_waiting_gang_only_free_work_that_can_resume_starts_and_it_may_use_the_reservation() {
    // a's gang reserves hosts 0 and 1 (free from 2 h); host 0's two idle GPUs are reserved, host
    // 2's one idle GPU is not (b's work there is protected until 3 h).
    let mut w = World::new(TWO_TEAMS, 3, 8);
    w.history("b", 400.0);
    w.running("b", 2 * HOUR, 0, 0, &[0, 1, 2, 3, 4, 5]);
    w.running("b", 2 * HOUR, 0, 1, &[0, 1, 2, 3, 4, 5, 6, 7]);
    w.running("b", 3 * HOUR, 0, 2, &[0, 1, 2, 3, 4, 5, 6]);
    let gang = w.submit("a", 16, HOUR);
    let mut free = |gpus, resumable, priority| {
        let mut spec = w.spec("b", gpus, 0);
        spec.resumable = resumable;
        spec.priority = priority;
        w.submit_spec(spec)
    };
    // Free work that cannot resume would lose its progress when the gang (or other funded work)
    // takes the GPUs back: it waits while funded work waits, even where an idle GPU is open.
    for priority in 0..40 {
        free(2, false, 100 - priority);
    }
    let single = free(1, false, 10);
    // Free work that can resume goes first and may backfill: two GPUs fit only host 0's.
    let resumable = free(2, true, 5);
    let decision = w.decide();
    assert_eq!(decision.reservations.len(), 1);
    assert_eq!(decision.reservations[0].workload, gang);
    assert_eq!(
        starts(&decision),
        [(resumable, &Placement::on(NodeId(0), GpuSet::of(&[6, 7])))]
    );
    assert!(matches!(
        w.explain(single).waiting_for,
        WaitReason::IdleOnly {
            funded_waiting: true,
            ..
        }
    ));
}

#[test]
fn explanation_reports_position_and_ratios_along_the_path() {
    let mut w = World::new(&[("p", 1.0), ("p/x", 1.0), ("p/y", 1.0), ("q", 1.0)], 1, 8);
    w.history("q", 300.0);
    w.history("p/y", 10.0);
    let holder = w.running("q", 2 * HOUR, 0, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    w.submit("p/x", 1, HOUR);
    let y = w.submit("p/y", 4, HOUR);
    w.submit("q", 1, HOUR);
    let e = w.explain(y);
    assert_eq!((e.position, e.queue_len, e.leaf_rank), (2, 3, 2));
    let names: Vec<&str> = e
        .path
        .iter()
        .map(|s| w.engine.tree().path(s.node))
        .collect();
    assert_eq!(names, ["p", "p/y"]);
    assert_eq!((e.path[0].sibling_rank, e.path[0].siblings), (1, 2));
    assert_eq!((e.path[1].sibling_rank, e.path[1].siblings), (2, 2));
    assert!(e.path[1].ratio > 0.0 && e.path[1].usage == 36_000.0);
    // Who goes first at each level: p does at the top; inside p, x (which used nothing).
    assert_eq!(e.path[0].ahead, None);
    let ahead = e.path[1].ahead.expect("y ranks second among p's children");
    assert_eq!(w.engine.tree().path(ahead.node), "p/x");
    assert_eq!(ahead.ratio, 0.0);
    let WaitReason::Capacity {
        protected_gpus,
        protected_until,
        holders,
        ..
    } = e.waiting_for
    else {
        panic!("capacity expected, got {:?}", e.waiting_for);
    };
    assert_eq!((protected_gpus, protected_until), (8, Some(2 * HOUR)));
    // It names who holds the GPUs and from when it may take them.
    assert_eq!(holders, [(holder, Some(2 * HOUR))]);
}

#[test]
fn explanation_names_hosts_out_of_service_and_impossible_requests() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.nodes[1].health = Health::Cordoned;
    let gang = w.submit("a", 16, HOUR);
    let huge = w.submit("a", 24, HOUR);
    assert_eq!(
        w.explain(gang).waiting_for,
        WaitReason::HostsOutOfService {
            nodes: vec![NodeId(1)]
        }
    );
    assert_eq!(
        w.explain(huge).waiting_for,
        WaitReason::TooLarge {
            gpus: 24,
            largest_placement: 16
        }
    );
    let fits = w.submit("a", 8, HOUR);
    assert!(matches!(
        w.explain(fits).waiting_for,
        WaitReason::StartsNow { .. }
    ));
}

#[test]
fn reservations_together_hold_at_most_half_the_cluster_beyond_the_first() {
    let mut w = World::new(TWO_TEAMS, 4, 8);
    w.history("b", 1_000.0);
    for node in 0..4 {
        w.running(
            "b",
            2 * HOUR + i64::from(node) * 60,
            0,
            node,
            &[0, 1, 2, 3, 4, 5, 6, 7],
        );
    }
    // Each gang needs three of the four hosts: the first reserves, whatever its size; the second
    // would take the reserved total past half the cluster.
    let first = w.submit("a", 24, HOUR);
    w.submit("a", 24, HOUR);
    let decision = w.decide();
    assert!(decision.actions.is_empty());
    let holders: Vec<WorkloadId> = decision.reservations.iter().map(|r| r.workload).collect();
    assert_eq!(holders, [first]);
    assert_eq!(decision.reservations[0].at, 2 * HOUR + 2 * 60);

    let mut small = World::new(TWO_TEAMS, 8, 8);
    small.history("b", 1_000.0);
    for node in 0..8 {
        small.running("b", 2 * HOUR, 0, node, &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
    let gangs = [small.submit("a", 16, HOUR), small.submit("a", 16, HOUR)];
    let held: Vec<WorkloadId> = small
        .decide()
        .reservations
        .iter()
        .map(|r| r.workload)
        .collect();
    assert_eq!(held, gangs, "two quarters of the cluster fit within half");
}
