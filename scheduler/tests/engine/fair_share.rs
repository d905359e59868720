//! DESIGN §4.1–4.7 and §4.10: ranking, queue order, protection, preemption, damping, requeue.

use scheduler::*;

use crate::support::{preempted, starts, World};

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

fn preempt_reasons(decision: &Decision) -> Vec<(WorkloadId, PreemptReason, AfterStop)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt {
                workload,
                reason,
                then,
            } => Some((*workload, *reason, *then)),
            _ => None,
        })
        .collect()
}

#[test]
fn usage_sums_up_the_tree_and_ratios_compare_it_with_the_funded_time() {
    let mut w = World::new(&[("p", 1.0), ("p/x", 1.0), ("p/y", 1.0), ("q", 2.0)], 1, 8);
    w.history("p/x", 100.0);
    w.history("p/y", 50.0);
    let s = w.engine.standings(w.now);
    let p = w.engine.tree().find("p").unwrap();
    assert_eq!(s.usage(p), 150.0 * 3_600.0);
    // p is funded for a third of 8 GPUs over 7 days.
    let funded = 8.0 * 7.0 * 86_400.0 / 3.0;
    assert!((s.allocated(p) - funded).abs() < 1e-6);
    assert!((s.ratio(p) - 150.0 * 3_600.0 / funded).abs() < 1e-12);
}

#[test]
fn debug_job_preempts_free_sweep_within_one_tick() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    let sweep: Vec<WorkloadId> = (0..8).map(|g| w.running("b", 0, -HOUR, 0, &[g])).collect();
    let debug = w.submit("a", 1, 10 * 60);
    let decision = w.decide();
    let reasons = preempt_reasons(&decision);
    assert_eq!(reasons.len(), 1, "one sweep member makes room");
    assert!(sweep.contains(&reasons[0].0));
    assert_eq!(reasons[0].1.rule, PreemptRule::FreeWork);
    assert_eq!(reasons[0].1.preemptor.workload, debug);
    assert_eq!(starts(&decision).len(), 1);
    assert_eq!(starts(&decision)[0].0, debug);
}

#[test]
fn priority_does_not_cross_team_boundaries() {
    let mut w = World::new(TWO_TEAMS, 1, 2);
    w.history("b", 200.0);
    w.running("a", HOUR, 0, 0, &[0]);
    let mut urgent_b = w.spec("b", 1, HOUR);
    urgent_b.priority = 100;
    let urgent_b = w.submit_spec(urgent_b);
    let mut low_a = w.spec("a", 1, HOUR);
    low_a.priority = -5;
    let low_a = w.submit_spec(low_a);
    let mut high_a = w.spec("a", 1, HOUR);
    high_a.priority = 5;
    high_a.submitted_at = 60;
    let high_a = w.submit_spec(high_a);

    assert_eq!(w.explain(high_a).position, 1);
    assert_eq!(w.explain(low_a).position, 2);
    assert_eq!(w.explain(urgent_b).position, 3);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [high_a]
    );
}

#[test]
fn queue_orders_by_leaf_rank_then_priority_then_submit_time() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("a", 300.0);
    let a_old = w.submit("a", 1, HOUR);
    w.now = 10;
    let a_new = w.submit("a", 1, HOUR);
    let b = w.submit("b", 1, HOUR);
    let free_b = w.submit("b", 1, 0);
    let order: Vec<usize> = [b, a_old, a_new, free_b]
        .iter()
        .map(|&id| w.explain(id).position)
        .collect();
    assert_eq!(order, [1, 2, 3, 4]);
}

#[test]
fn unallocated_work_waits_behind_all_allocated_work() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 300.0);
    for g in 0..7 {
        w.running("b", HOUR, 0, 0, &[g]);
    }
    let free_a = w.submit("a", 1, 0);
    w.now = 60;
    let funded_b = w.submit("b", 1, HOUR);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [funded_b]
    );
    assert_eq!(
        w.explain(free_a).waiting_for,
        WaitReason::IdleOnly {
            idle_gpus: 0,
            resumable_ahead: 0,
            funded_waiting: false,
        }
    );
}

#[test]
fn free_work_that_can_resume_starts_before_free_work_that_cannot_whatever_the_ranks() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    // `a` ranks first (no usage), `b` has run for hours: by rank alone `a`'s sweep goes first.
    w.history("b", 300.0);
    w.running("b", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5]);
    let mut final_a = w.spec("a", 2, 0);
    final_a.resumable = false;
    let final_a = w.submit_spec(final_a);
    w.now = 60;
    let resumable_b = w.submit("b", 2, 0);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [resumable_b],
        "the two idle GPUs go to the free work that keeps its progress if preempted"
    );
    assert_eq!(
        w.explain(final_a).waiting_for,
        WaitReason::IdleOnly {
            idle_gpus: 0,
            resumable_ahead: 1,
            funded_waiting: false,
        }
    );
    // With nothing resumable waiting, free work that cannot resume takes idle GPUs as before.
    w.apply(&decision);
    w.remaining.insert(resumable_b, HOUR);
    w.advance_to(2 * HOUR);
    assert!(w.finished.iter().any(|&(id, _)| id == resumable_b));
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [final_a]
    );
}

#[test]
fn free_work_that_cannot_resume_waits_while_funded_work_waits() {
    // b's protected work holds six GPUs of the one host; a's funded 4-GPU request cannot start.
    // Of the two idle GPUs, free work that can resume takes one; free work that cannot resume
    // would be stopped, its progress lost, as soon as the funded work could start: it waits.
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 300.0);
    w.running("b", HOUR, 0, 0, &[0, 1, 2, 3, 4, 5]);
    w.now = 60;
    let funded = w.submit("a", 4, HOUR);
    let mut fragile = w.spec("a", 1, 0);
    fragile.resumable = false;
    let fragile = w.submit_spec(fragile);
    let sweep = w.submit("b", 1, 0);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [sweep]
    );
    assert!(matches!(
        w.explain(fragile).waiting_for,
        WaitReason::IdleOnly {
            idle_gpus: 1,
            funded_waiting: true,
            ..
        }
    ));
    // Once no funded work waits, it takes an idle GPU.
    w.queued.retain(|q| q.id != funded);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [sweep, fragile]
    );
}

#[test]
fn unallocated_work_only_takes_idle_gpus() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 300.0);
    w.running("b", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let free_a = w.submit("a", 1, 0);
    let decision = w.decide();
    assert!(
        decision.actions.is_empty(),
        "free work never preempts: {decision:?}"
    );
    assert!(matches!(
        w.explain(free_a).waiting_for,
        WaitReason::IdleOnly { .. }
    ));
}

#[test]
fn protected_workload_is_never_preempted() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.history("b", 400.0);
    for node in 0..2 {
        w.running("b", 2 * HOUR, -HOUR / 2, node, &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
    let a = w.submit("a", 16, HOUR);
    let decision = w.decide();
    assert!(decision.actions.is_empty());
    let protection_ends = -HOUR / 2 + 2 * HOUR;
    assert_eq!(decision.next_wake, Some(protection_ends));
    assert_eq!(decision.reservations.len(), 1);
    assert_eq!(decision.reservations[0].workload, a);
    assert_eq!(decision.reservations[0].at, protection_ends);
}

#[test]
fn unprotected_work_of_an_over_served_leaf_is_preempted_with_its_reason() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    let victim = w.running("b", 2 * HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let a = w.submit("a", 8, HOUR);
    let decision = w.decide();
    let reasons = preempt_reasons(&decision);
    assert_eq!(reasons.len(), 1);
    let (id, reason, then) = reasons[0];
    assert_eq!((id, then), (victim, AfterStop::Requeue));
    assert_eq!(reason.at, 0);
    assert_eq!(reason.preemptor.workload, a);
    assert_eq!(reason.preemptor.leaf, w.leaf("a"));
    assert_eq!(reason.victim.leaf, w.leaf("b"));
    assert!(reason.preemptor.ratio < reason.victim.ratio);
    assert_eq!(reason.victim_min_runtime, 2 * HOUR);
    assert_eq!(reason.victim_protected_until, Some(-HOUR));
    let PreemptRule::FairShare { split, margin } = reason.rule else {
        panic!("fair-share rule expected, got {:?}", reason.rule);
    };
    assert_eq!((split.ours, split.theirs), (w.leaf("a"), w.leaf("b")));
    assert!(split.their_ratio > split.our_ratio + margin);
    assert_eq!(starts(&decision)[0].0, a);
}

#[test]
fn work_keeps_running_while_its_leaf_ranks_at_least_as_well() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    w.running("a", HOUR, -3 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let b = w.submit("b", 8, HOUR);
    let decision = w.decide();
    assert!(decision.actions.is_empty());
    let WaitReason::Capacity {
        outranking_gpus, ..
    } = w.explain(b).waiting_for
    else {
        panic!("capacity expected");
    };
    assert_eq!(outranking_gpus, 8);
}

#[test]
fn preemption_takes_free_work_before_funded_work() {
    let mut w = World::new(&[("a", 1.0), ("b", 1.0), ("c", 1.0)], 1, 8);
    w.history("b", 400.0);
    let free = w.running("c", 0, -10 * HOUR, 0, &[0, 1, 2, 3]);
    w.running("b", HOUR, -2 * HOUR, 0, &[4, 5, 6, 7]);
    w.submit("a", 4, HOUR);
    assert_eq!(preempted(&w.decide()), [free]);
}

#[test]
fn preemption_picks_the_cheapest_set_and_non_resumable_work_last() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    let long = w.running("b", HOUR, -10 * HOUR, 0, &[0, 1, 2, 3]);
    let short = w.running("b", HOUR, -3 * HOUR, 0, &[4, 5]);
    let mut fragile = w.spec("b", 2, HOUR);
    fragile.resumable = false;
    w.place(fragile, -3 * HOUR, &[(0, &[6, 7])]);

    w.submit("a", 2, HOUR);
    assert_eq!(preempted(&w.decide()), [short]);
    w.queued.clear();
    w.submit("a", 4, HOUR);
    // Freeing 4 GPUs without touching the non-resumable one costs more progress, and still wins.
    assert_eq!(preempted(&w.decide()), [long]);
}

#[test]
fn resumable_victims_are_requeued_and_others_end_preempted() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    // Past the kill margin: b is about 1.3 of its week ahead.
    w.history("b", 900.0);
    let resumable = w.running("b", HOUR, -2 * HOUR, 0, &[0, 1, 2, 3]);
    let mut spec = w.spec("b", 4, HOUR);
    spec.resumable = false;
    let fragile = w.place(spec, -2 * HOUR, &[(0, &[4, 5, 6, 7])]);
    w.submit("a", 8, HOUR);
    let mut outcomes: Vec<(WorkloadId, AfterStop)> = preempt_reasons(&w.decide())
        .into_iter()
        .map(|(id, _, then)| (id, then))
        .collect();
    outcomes.sort_by_key(|o| o.0);
    assert_eq!(
        outcomes,
        [
            (resumable, AfterStop::Requeue),
            (fragile, AfterStop::EndPreempted)
        ]
    );
}

#[test]
fn damping_keeps_near_equal_leaves_from_preempting_each_other() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("a", 100.0);
    // With the 16 GPU-hours b's running work has already used, b is 6 GPU-hours ahead.
    w.history("b", 90.0);
    w.running("b", HOUR, -2 * HOUR, 0, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let a = w.submit("a", 8, HOUR);
    assert!(w.decide().actions.is_empty());
    let WaitReason::Capacity {
        within_margin_gpus, ..
    } = w.explain(a).waiting_for
    else {
        panic!("capacity expected");
    };
    assert_eq!(within_margin_gpus, 8);

    w.engine.set_config(Config {
        damping_margin: 0.0,
        ..*w.engine.config()
    });
    assert_eq!(preempted(&w.decide()).len(), 1);
}

/// Two equally funded teams that both always want the whole node, for three days.
fn swaps_between_equal_leaves(margin: f64) -> usize {
    let config = Config {
        damping_margin: margin,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 1, 8, config);
    let mut preemptions = 0;
    while w.now < 3 * DAY {
        for team in ["a", "b"] {
            let waiting = w.queued.iter().filter(|q| q.leaf == w.leaf(team)).count();
            if waiting == 0 {
                w.submit(team, 8, 30 * 60);
            }
        }
        preemptions += preempted(&w.step()).len();
        w.advance_to(w.now + 5 * 60);
    }
    preemptions
}

#[test]
fn damping_prevents_ping_pong_between_equal_leaves() {
    let undamped = swaps_between_equal_leaves(0.0);
    let damped = swaps_between_equal_leaves(Config::default().damping_margin);
    assert!(
        undamped >= 100,
        "without damping they swap at every protection end: {undamped}"
    );
    assert!(
        damped * 4 <= undamped,
        "damping should cut swaps sharply: {damped} vs {undamped}"
    );
    assert!(
        damped > 0,
        "damping delays time-slicing, it does not stop it"
    );
}

#[test]
fn next_wake_is_the_earliest_protection_end_that_matters() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", 400.0);
    // a's own work ends protection first, but a can never preempt itself.
    w.running("a", HOUR, -HOUR / 2, 0, &[0, 1, 2, 3]);
    w.running("b", 2 * HOUR, 0, 0, &[4, 5, 6, 7]);
    w.submit("a", 4, HOUR);
    assert_eq!(w.decide().next_wake, Some(2 * HOUR));
}

#[test]
fn nothing_waiting_means_no_wake_up() {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.running("b", 2 * HOUR, 0, 0, &[4, 5, 6, 7]);
    let decision = w.decide();
    assert_eq!(
        decision,
        Decision {
            actions: vec![],
            reservations: vec![],
            next_wake: None,
            decide_again: false,
        }
    );
}

/// `a` waits for the whole node; `b` runs unprotected work on it, and is ahead of `a` by about
/// `b_hours - 16` GPU-hours of an 8-GPU node's week (672 funded GPU-hours each).
fn one_unprotected_run_of_b(b_hours: f64, resumable: bool) -> (World, WorkloadId, WorkloadId) {
    let mut w = World::new(TWO_TEAMS, 1, 8);
    w.history("b", b_hours);
    let mut spec = w.spec("b", 8, HOUR);
    spec.resumable = resumable;
    let run = w.place(spec, -2 * HOUR, &[(0, &[0, 1, 2, 3, 4, 5, 6, 7])]);
    let a = w.submit("a", 8, HOUR);
    (w, run, a)
}

#[test]
fn work_that_cannot_resume_is_killed_only_past_the_wider_kill_margin() {
    let config = Config::default();
    assert!(config.kill_margin > config.damping_margin);
    // b is ahead by about 0.12 of its week: past the damping margin, within the kill margin.
    for resumable in [true, false] {
        let (w, run, a) = one_unprotected_run_of_b(64.0, resumable);
        let decision = w.decide();
        if resumable {
            assert_eq!(preempted(&decision), [run], "resumable work is requeued");
            continue;
        }
        assert!(
            decision.actions.is_empty(),
            "its progress would be lost: {decision:?}"
        );
        let WaitReason::Capacity {
            within_margin_gpus,
            protected_gpus,
            ..
        } = w.explain(a).waiting_for
        else {
            panic!("capacity expected");
        };
        assert_eq!((within_margin_gpus, protected_gpus), (8, 0));
    }
    // b ahead by about 1.3: the kill margin is passed, and the reason says which margin applied.
    let (w, run, _) = one_unprotected_run_of_b(900.0, false);
    let reasons = preempt_reasons(&w.decide());
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, run);
    assert_eq!(reasons[0].2, AfterStop::EndPreempted);
    let PreemptRule::FairShare { margin, split } = reasons[0].1.rule else {
        panic!("fair share expected: {:?}", reasons[0].1.rule);
    };
    assert_eq!(margin, config.kill_margin);
    assert!(split.their_ratio > split.our_ratio + config.kill_margin);
}

#[test]
fn a_kill_margin_below_the_damping_margin_reads_as_the_damping_margin() {
    // b is ahead by about 0.05 of its week.
    let (mut w, run, _) = one_unprotected_run_of_b(17.0, false);
    assert!(
        w.decide().actions.is_empty(),
        "within the default kill margin"
    );
    let config = *w.engine.config();
    w.engine.set_config(Config {
        kill_margin: 0.0,
        ..config
    });
    assert_eq!(preempted(&w.decide()), [run], "past the damping margin");
    w.engine.set_config(Config {
        kill_margin: 0.0,
        damping_margin: 0.1,
        ..config
    });
    assert!(w.decide().actions.is_empty(), "within the damping margin");
}
