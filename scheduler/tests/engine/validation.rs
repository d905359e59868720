//! Bad snapshots get a specific error and no decision.

use scheduler::*;

use crate::support::World;

#[test]
fn snapshot_with_unknown_leaf_is_rejected() {
    let mut w = World::new(&[("p", 1.0), ("p/x", 1.0)], 1, 8);
    let mut spec = w.spec("p/x", 1, HOUR);
    spec.leaf = w.engine.tree().find("p").unwrap();
    w.submit_spec(spec);
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::UnknownLeaf {
            workload: spec.id,
            leaf: spec.leaf
        }
    );
    spec.leaf = BudgetId(99);
    w.queued[0] = spec;
    assert!(matches!(
        w.engine.decide(&w.state(), 0),
        Err(SnapshotError::UnknownLeaf { .. })
    ));
}

#[test]
fn double_booked_gpu_is_rejected() {
    let mut w = World::new(&[("a", 1.0)], 1, 8);
    let first = w.running("a", HOUR, 0, 0, &[0, 1]);
    let second = w.running("a", HOUR, 0, 0, &[1, 2]);
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::DoubleBooked {
            node: NodeId(0),
            gpu: 1,
            first,
            second
        }
    );
}

#[test]
fn placement_outside_the_node_is_rejected() {
    let mut w = World::new(&[("a", 1.0)], 1, 4);
    let id = w.running("a", HOUR, 0, 0, &[5]);
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::PlacementOutOfRange {
            workload: id,
            node: NodeId(0)
        }
    );
}

#[test]
fn the_same_workload_twice_is_rejected() {
    let mut w = World::new(&[("a", 1.0)], 1, 8);
    let spec = w.spec("a", 1, HOUR);
    w.submit_spec(spec);
    w.submit_spec(spec);
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(err, SnapshotError::DuplicateWorkload { workload: spec.id });
}

#[test]
fn a_workload_both_running_and_queued_is_rejected_whether_or_not_the_lists_are_in_id_order() {
    let mut w = World::new(&[("a", 1.0)], 1, 8);
    let before = w.submit("a", 1, HOUR);
    let both = w.running("a", HOUR, 0, 0, &[0]);
    let after = w.submit("a", 1, HOUR);
    let spec = w.running[0].spec;
    // In id order, as the server lists them: found by merging the two lists.
    w.queued.insert(1, spec);
    assert_eq!(w.queued[0].id, before);
    assert_eq!(w.queued[2].id, after);
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(err, SnapshotError::DuplicateWorkload { workload: both });
    // In any other order: found by sorting.
    w.queued.reverse();
    let err = w.engine.decide(&w.state(), 0).unwrap_err();
    assert_eq!(err, SnapshotError::DuplicateWorkload { workload: both });
    // Without it, the same lists in id order are accepted.
    w.queued.retain(|q| q.id != both);
    w.queued.reverse();
    assert!(w.engine.decide(&w.state(), 0).is_ok());
}

#[test]
fn zero_gpu_request_is_rejected() {
    let mut w = World::new(&[("a", 1.0)], 1, 8);
    let id = w.submit("a", 0, HOUR);
    assert_eq!(
        w.engine.decide(&w.state(), 0).unwrap_err(),
        SnapshotError::NoGpus { workload: id }
    );
}
