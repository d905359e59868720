//! DESIGN §4.11: the fast lane for debug work, and the passes of one moment (`Settle`).

use scheduler::*;

use crate::support::*;

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

fn preempt_rules(decision: &Decision) -> Vec<(WorkloadId, PreemptRule)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt {
                workload, reason, ..
            } => Some((*workload, reason.rule)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_debug_workload_takes_resumable_work_of_a_better_ranked_leaf_past_its_protection() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.history("b", 400.0);
    let old = w.running("a", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    w.running("a", HOUR, -HOUR / 2, 1, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let debug = w.submit("b", 1, 10 * 60);
    let decision = w.decide();
    assert_eq!(preempt_rules(&decision), [(old, PreemptRule::FastLane)]);
    assert_eq!(starts(&decision)[0].0, debug);
}

#[test]
fn the_fast_lane_leaves_non_resumable_work_of_better_ranked_leaves_alone() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    let mut spec = w.spec("a", 8, HOUR);
    spec.resumable = false;
    w.place(spec, -3 * HOUR, &[(0, &[0, 1, 2, 3, 4, 5, 6, 7])]);
    w.submit("b", 1, 10 * 60);
    assert!(w.decide().actions.is_empty());
}

#[test]
fn work_that_is_not_debug_work_does_not_use_the_fast_lane() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    w.running("a", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    w.submit("b", 1, 30 * 60);
    assert!(w.decide().actions.is_empty());
}

#[test]
fn the_fast_lane_stops_at_its_share_of_the_cluster() {
    let config = Config {
        fast_lane: 0.25,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 4, 8, config);
    // Three hosts busy with protected work: only host 0's unprotected runs are within reach.
    for node in 1..4 {
        w.running("a", 4 * HOUR, 0, node, &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
    w.history("b", 400.0);
    for gpus in [[0, 1], [2, 3], [4, 5], [6, 7]] {
        w.running("a", HOUR, -3 * HOUR, 0, &gpus);
    }
    // A quarter of 32 GPUs is 8: one 6-GPU debug workload fits the lane, a second does not.
    let first = w.submit("b", 6, 10 * 60);
    w.submit("b", 6, 10 * 60);
    let decision = w.decide();
    let rules = preempt_rules(&decision);
    assert_eq!(
        rules.len(),
        3,
        "three 2-GPU runs make room for six: {rules:?}"
    );
    assert!(rules.iter().all(|r| r.1 == PreemptRule::FastLane));
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [first]);

    let off = Config {
        fast_lane: 0.0,
        ..Config::default()
    };
    w.engine.set_config(off);
    assert!(w.decide().actions.is_empty(), "a lane of 0 is no lane");
}

/// 32 GPUs: a lane of a quarter (8 GPUs) that may reach half (16) while the last hour's use
/// averaged under a quarter; hosts 0 and 1 hold team a's unprotected resumable runs, the others
/// protected work; team b ranks below a and submits two 6-GPU debug workloads.
fn lane_with_a_peak() -> (World, [WorkloadId; 2]) {
    let config = Config {
        fast_lane: 0.25,
        fast_lane_peak: 0.5,
        fast_lane_window: HOUR,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 4, 8, config);
    for node in 2..4 {
        w.running("a", 4 * HOUR, 0, node, &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
    w.history("b", 400.0);
    for node in 0..2 {
        for gpus in [[0, 1], [2, 3], [4, 5], [6, 7]] {
            w.running("a", HOUR, -3 * HOUR, node, &gpus);
        }
    }
    let debug = [w.submit("b", 6, 10 * 60), w.submit("b", 6, 10 * 60)];
    (w, debug)
}

fn started(decision: &Decision) -> Vec<WorkloadId> {
    starts(decision).iter().map(|s| s.0).collect()
}

#[test]
fn after_a_quiet_hour_debug_work_may_hold_the_lanes_peak_at_once() {
    let (mut w, debug) = lane_with_a_peak();
    // Debug work that ended before the window does not count.
    w.ended_debug.push(EndedRun {
        gpus: 8,
        started_at: -3 * HOUR,
        ended_at: -HOUR,
    });
    let decision = w.decide();
    assert_eq!(
        started(&decision),
        debug,
        "12 GPUs are within the peak of 16"
    );
    assert!(preempt_rules(&decision)
        .iter()
        .all(|r| r.1 == PreemptRule::FastLane));
}

#[test]
fn once_the_lane_used_its_share_over_the_window_it_is_held_to_its_share_and_looks_again_in_a_minute(
) {
    let (mut w, debug) = lane_with_a_peak();
    // 8 GPUs of debug work for the whole last hour: the lane's share, used.
    w.ended_debug.push(EndedRun {
        gpus: 8,
        started_at: -2 * HOUR,
        ended_at: 0,
    });
    let decision = w.decide();
    assert_eq!(started(&decision), [debug[0]], "the share of 8 holds one");
    assert_eq!(decision.next_wake, Some(60));

    // A minute later the oldest minute of that run has left the window: the peak is open again.
    w.apply(&decision);
    w.advance_to(60);
    assert_eq!(started(&w.decide()), [debug[1]]);
}

#[test]
fn the_running_debug_works_time_in_the_window_counts_toward_the_lanes_share() {
    let (mut w, debug) = lane_with_a_peak();
    // In place of host 3's protected work, 8 GPUs of debug work (not resumable: the lane leaves
    // it alone) running for the whole hour: the share, used.
    let on_host_3 = |w: &mut World, started_at: Time| {
        w.running.retain(|r| r.placement.parts[0].node != NodeId(3));
        let mut spec = w.spec("b", 8, 10 * 60);
        spec.resumable = false;
        w.place(spec, started_at, &[(3, &[0, 1, 2, 3, 4, 5, 6, 7])]);
    };
    on_host_3(&mut w, -HOUR);
    let decision = w.decide();
    assert!(
        started(&decision).is_empty(),
        "8 GPUs running debug work fill a share of 8: {:?}",
        started(&decision)
    );
    on_host_3(&mut w, -HOUR / 2);
    assert_eq!(
        started(&w.decide()),
        [debug[0]],
        "half an hour of 8 GPUs is under the share: the peak of 16 holds one more"
    );
}

#[test]
fn free_work_waits_for_the_pass_after_one_that_requeued_funded_work() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.history("a", 400.0);
    let victim = w.running("a", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    w.running("a", 2 * HOUR, 0, 1, &[0, 1, 2, 3]);
    let b = w.submit("b", 8, HOUR);
    let free = w.submit("b", 2, 0);
    let first = w.decide();
    assert_eq!(preempted(&first), [victim]);
    let started: Vec<WorkloadId> = starts(&first).iter().map(|s| s.0).collect();
    assert_eq!(started, [b], "free work does not start beside a requeue");
    assert!(first.decide_again);

    w.apply(&first);
    let second = w.decide();
    let started: Vec<WorkloadId> = starts(&second).iter().map(|s| s.0).collect();
    assert_eq!(
        started,
        [free],
        "the requeued 8-GPU run fits nowhere; free work does"
    );
    assert!(!second.decide_again);

    let mut settle = Settle::new();
    assert!(settle.next_pass());
    settle.applied(&first);
    assert!(settle.next_pass());
    settle.applied(&second);
    assert!(!settle.next_pass());
    assert_eq!(settle.passes(), 2);
}

#[test]
fn on_a_cluster_too_small_for_a_tenth_to_hold_one_the_lane_still_takes_one_debug_workload() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    let old = w.running("a", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let debug = w.submit("b", 8, 10 * 60);
    let decision = w.decide();
    assert_eq!(preempt_rules(&decision), [(old, PreemptRule::FastLane)]);
    assert_eq!(starts(&decision)[0].0, debug);
}

#[test]
fn a_cluster_filled_with_protected_work_keeps_one_debug_workloads_room_and_debug_starts_at_once() {
    // 100 hosts of 8: the lane's tenth is 80 GPUs, a hundredth is 8: the headroom is one host.
    let mut w = World::new(TWO_TEAMS, 100, 8);
    let training: Vec<WorkloadId> = (0..100).map(|_| w.submit("a", 8, 4 * HOUR)).collect();
    let first = w.step();
    assert_eq!(
        starts(&first).len(),
        99,
        "the hundredth would take the last 8 GPUs debug work could have"
    );
    let held = training[99];
    match w.explain(held).waiting_for {
        WaitReason::Headroom { kept_gpus } => assert_eq!(kept_gpus, 8),
        other => panic!("held back by the headroom, not {other:?}"),
    }
    assert!(
        first.next_wake.is_some(),
        "it is woken when protected resumable work becomes preemptible"
    );
    // A debug workload of the other team starts at once, though every other GPU is protected.
    let debug = w.submit("b", 2, 10 * 60);
    let second = w.step();
    let started: Vec<WorkloadId> = starts(&second).iter().map(|s| s.0).collect();
    assert_eq!(started, [debug]);
    assert!(preempted(&second).is_empty());

    // Without a headroom (or without the lane) all hundred start, and debug work waits.
    for config in [
        Config {
            headroom_gpus: 0,
            ..Config::default()
        },
        Config {
            fast_lane: 0.0,
            ..Config::default()
        },
    ] {
        let mut w = World::with_config(TWO_TEAMS, 100, 8, config);
        for _ in 0..100 {
            w.submit("a", 8, 4 * HOUR);
        }
        assert_eq!(starts(&w.step()).len(), 100);
        w.submit("b", 2, 10 * 60);
        assert!(w.decide().actions.is_empty());
    }
}

#[test]
fn on_a_small_cluster_the_headroom_is_at_most_a_hundredth_of_it() {
    // 11 hosts of 8 (the reference's smallest): the lane's tenth is 8 GPUs, but a hundredth is
    // under one GPU, so nothing is held back from funded work.
    let mut w = World::new(TWO_TEAMS, 11, 8);
    for _ in 0..11 {
        w.submit("a", 8, 4 * HOUR);
    }
    assert_eq!(starts(&w.step()).len(), 11);
    // 50 hosts: a hundredth is 4 GPUs, so half a host is kept: work of 4 GPUs fills 99 halves,
    // and the last half waits.
    let mut w = World::new(TWO_TEAMS, 50, 8);
    let halves: Vec<WorkloadId> = (0..100).map(|_| w.submit("a", 4, 4 * HOUR)).collect();
    assert_eq!(starts(&w.step()).len(), 99);
    match w.explain(halves[99]).waiting_for {
        WaitReason::Headroom { kept_gpus } => assert_eq!(kept_gpus, 4),
        other => panic!("held back by the headroom, not {other:?}"),
    }
}

#[test]
fn on_a_large_cluster_the_headroom_is_a_hundredth_of_it_so_a_flood_of_protected_work_leaves_room_for_many_debug_workloads(
) {
    // 400 hosts of 8: a hundredth is 32 GPUs, four hosts. Protected training fills the rest.
    let mut w = World::new(TWO_TEAMS, 400, 8);
    let training: Vec<WorkloadId> = (0..400).map(|_| w.submit("a", 8, 4 * HOUR)).collect();
    assert_eq!(starts(&w.step()).len(), 396);
    match w.explain(training[399]).waiting_for {
        WaitReason::Headroom { kept_gpus } => assert_eq!(kept_gpus, 32),
        other => panic!("held back by the headroom, not {other:?}"),
    }
    // Thirty-two 1-GPU debug workloads of the other team start at once.
    let debug: Vec<WorkloadId> = (0..32).map(|_| w.submit("b", 1, 10 * 60)).collect();
    let started: Vec<WorkloadId> = starts(&w.step()).iter().map(|s| s.0).collect();
    assert_eq!(started, debug);

    // An admin's bound on the headroom holds whatever the cluster's size.
    let config = Config {
        headroom_gpus: 8,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 400, 8, config);
    for _ in 0..400 {
        w.submit("a", 8, 4 * HOUR);
    }
    assert_eq!(starts(&w.step()).len(), 399);
}

#[test]
fn the_headroom_is_none_where_the_lanes_share_is_under_one_gpu() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.submit("a", 8, HOUR);
    assert_eq!(starts(&w.decide()).len(), 1);
}
