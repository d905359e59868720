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
