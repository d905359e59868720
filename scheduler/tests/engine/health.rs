//! DESIGN §4.9: hosts leaving service drain themselves, without a human negotiating.

use scheduler::*;

use crate::support::{drained, starts, World};

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

#[test]
fn unhealthy_node_drains_each_workload_at_its_min_runtime() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    let free = w.running("a", 0, -HOUR, 0, &[0]);
    let young = w.running("a", HOUR, -HOUR / 2, 0, &[1, 2]);
    let old = w.running("b", HOUR, -2 * HOUR, 0, &[3]);
    let younger = w.running("b", 2 * HOUR, -HOUR / 2, 0, &[4]);
    w.nodes[0].health = Health::Unhealthy;

    let decision = w.step();
    assert_eq!(
        drained(&decision),
        [
            (free, DrainRule::HostUnhealthy, AfterStop::Requeue),
            (old, DrainRule::HostUnhealthy, AfterStop::Requeue)
        ]
    );
    assert_eq!(decision.next_wake, Some(HOUR / 2));

    // Requeued work is placed by the next decision, on the healthy host.
    let decision = w.step();
    assert_eq!(starts(&decision).len(), 2);
    assert!(starts(&decision)
        .iter()
        .all(|s| s.1.nodes().all(|n| n == NodeId(1))));

    w.advance_to(HOUR / 2);
    let decision = w.step();
    assert_eq!(
        drained(&decision),
        [(young, DrainRule::HostUnhealthy, AfterStop::Requeue)]
    );
    assert_eq!(decision.next_wake, Some(3 * HOUR / 2));
    w.advance_to(3 * HOUR / 2);
    assert_eq!(
        drained(&w.step()),
        [(younger, DrainRule::HostUnhealthy, AfterStop::Requeue)]
    );
    assert!(w
        .running
        .iter()
        .all(|r| r.placement.nodes().all(|n| n == NodeId(1))));
}

#[test]
fn cordoned_node_takes_no_new_work() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.nodes[0].health = Health::Cordoned;
    w.running("a", HOUR, 0, 1, &[0, 1, 2, 3]);
    let eight = w.submit("a", 8, HOUR);
    let two = w.submit("a", 2, HOUR);
    let decision = w.decide();
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [two]
    );
    assert_eq!(
        starts(&decision)[0].1.nodes().collect::<Vec<_>>(),
        [NodeId(1)]
    );
    let e = w.explain(eight);
    assert!(
        matches!(e.waiting_for, WaitReason::Capacity { .. }),
        "{e:?}"
    );
    w.nodes[1].health = Health::Cordoned;
    assert_eq!(
        w.explain(eight).waiting_for,
        WaitReason::HostsOutOfService {
            nodes: vec![NodeId(0), NodeId(1)]
        }
    );
}

#[test]
fn down_node_requeues_resumable_and_fails_others_at_once() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    let resumable = w.running("a", 2 * HOUR, 0, 0, &[0, 1]);
    let mut spec = w.spec("a", 2, 2 * HOUR);
    spec.resumable = false;
    let fragile = w.place(spec, 0, &[(0, &[2, 3])]);
    w.nodes[0].health = Health::Down;
    w.now = 60;
    let decision = w.decide();
    assert_eq!(
        drained(&decision),
        [
            (resumable, DrainRule::HostDown, AfterStop::Requeue),
            (fragile, DrainRule::HostDown, AfterStop::Fail)
        ]
    );
    let Action::Drain { reason, .. } = &decision.actions[0] else {
        panic!("drain first")
    };
    assert_eq!(
        (reason.node, reason.at, reason.victim_protected_until),
        (NodeId(0), 60, Some(2 * HOUR))
    );
}

#[test]
fn gang_touching_a_down_node_is_lost_and_frees_its_healthy_nodes() {
    let mut w = World::new(TWO_TEAMS, 2, 8);
    let spec = w.spec("a", 16, HOUR);
    let gang = w.place(
        spec,
        0,
        &[
            (0, &[0, 1, 2, 3, 4, 5, 6, 7]),
            (1, &[0, 1, 2, 3, 4, 5, 6, 7]),
        ],
    );
    w.nodes[0].health = Health::Down;
    let small = w.submit("b", 8, HOUR);
    let decision = w.decide();
    assert_eq!(
        drained(&decision),
        [(gang, DrainRule::HostDown, AfterStop::Requeue)]
    );
    assert_eq!(starts(&decision)[0].0, small);
}
