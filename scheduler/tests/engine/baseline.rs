//! The priority baseline (DESIGN §4, last paragraph), behind the same interface.

use scheduler::*;

use crate::support::{drained, preempted, starts, World};

fn baseline(shares: &[(&str, f64)], nodes: usize, gpus: u32) -> World {
    World::with_config(
        shares,
        nodes,
        gpus,
        Config {
            policy: Policy::Priority,
            ..Config::default()
        },
    )
}

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

fn start_protection(decision: &Decision) -> Vec<(WorkloadId, Protection)> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Start {
                workload,
                protection,
                ..
            } => Some((*workload, *protection)),
            _ => None,
        })
        .collect()
}

#[test]
fn baseline_orders_by_global_priority_then_age_across_teams() {
    let mut w = baseline(TWO_TEAMS, 1, 2);
    w.history("b", 500.0);
    w.running("a", HOUR, 0, 0, &[0]);
    w.running[0].baseline_protected = true;
    let old_a = w.submit("a", 1, HOUR);
    w.now = 60;
    let mut urgent = w.spec("b", 1, HOUR);
    urgent.priority = 10;
    let urgent = w.submit_spec(urgent);
    assert_eq!(
        starts(&w.decide()).iter().map(|s| s.0).collect::<Vec<_>>(),
        [urgent]
    );
    assert_eq!(w.explain(old_a).position, 2);
}

#[test]
fn baseline_protects_work_up_to_each_leafs_cap() {
    let mut w = baseline(&[("a", 1.0), ("b", 3.0)], 1, 8);
    let first = w.submit("a", 1, HOUR);
    let second = w.submit("a", 1, HOUR);
    let third = w.submit("a", 1, HOUR);
    let free = w.submit("a", 1, 0);
    assert_eq!(
        start_protection(&w.decide()),
        [
            (first, Protection::UntilDone),
            (second, Protection::UntilDone),
            (third, Protection::None),
            (free, Protection::None)
        ]
    );
}

#[test]
fn baseline_preempts_only_preemptible_work_of_equal_or_lower_priority() {
    let mut w = baseline(TWO_TEAMS, 1, 8);
    let mut low = w.spec("a", 4, HOUR);
    low.priority = 5;
    let low = w.place(low, 0, &[(0, &[0, 1, 2, 3])]);
    let mut high = w.spec("a", 4, HOUR);
    high.priority = 20;
    w.place(high, 0, &[(0, &[4, 5, 6, 7])]);

    let mut weak = w.spec("b", 4, HOUR);
    weak.priority = 1;
    w.submit_spec(weak);
    assert!(w.decide().actions.is_empty(), "priority 1 preempts nothing");

    w.queued.clear();
    let mut strong = w.spec("b", 4, HOUR);
    strong.priority = 10;
    let strong = w.submit_spec(strong);
    let decision = w.decide();
    assert_eq!(preempted(&decision), [low]);
    assert_eq!(
        start_protection(&decision),
        [(strong, Protection::UntilDone)]
    );
    let Action::Preempt { reason, .. } = &decision.actions[0] else {
        panic!("preempt first")
    };
    assert_eq!(reason.rule, PreemptRule::Priority);
    assert_eq!((reason.preemptor.priority, reason.victim.priority), (10, 5));
}

#[test]
fn baseline_never_drains_protected_work() {
    let mut w = baseline(TWO_TEAMS, 1, 8);
    let protected = w.running("a", HOUR, -5 * HOUR, 0, &[0, 1]);
    w.running.last_mut().unwrap().baseline_protected = true;
    let loose = w.running("a", HOUR, -5 * HOUR, 0, &[2, 3]);
    w.nodes[0].health = Health::Unhealthy;
    let decision = w.decide();
    assert_eq!(
        drained(&decision),
        [(loose, DrainRule::HostUnhealthy, AfterStop::Requeue)]
    );
    assert!(!drained(&decision).iter().any(|d| d.0 == protected));
    assert_eq!(decision.next_wake, None);
}
