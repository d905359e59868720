//! The engine's reasons as JSON event details (data, not sentences: pages build the sentences).

use super::snapshot::Snapshot;
use scheduler::{AfterStop, DrainReason, DrainRule, Party, PreemptReason, PreemptRule, Protection};
use serde_json::{json, Value};

pub fn party(snapshot: &Snapshot, party: &Party) -> Value {
    let row = snapshot.workload(party.workload);
    json!({
        "workload_id": party.workload.0,
        "name": row.map(|w| w.name.clone()),
        "leaf": snapshot.tree.tree.path(party.leaf),
        "ratio": finite(party.ratio),
        "priority": party.priority,
    })
}

pub fn preempt(snapshot: &Snapshot, reason: &PreemptReason, then: AfterStop) -> Value {
    let (rule, split) = match reason.rule {
        PreemptRule::FreeWork
        | PreemptRule::Priority
        | PreemptRule::FastLane
        | PreemptRule::Reserved => (reason.rule.name(), Value::Null),
        PreemptRule::FairShare { split, margin } => (
            "fair-share",
            json!({
                "preemptor_side": snapshot.tree.tree.path(split.ours),
                "preemptor_side_ratio": finite(split.our_ratio),
                "victim_side": snapshot.tree.tree.path(split.theirs),
                "victim_side_ratio": finite(split.their_ratio),
                "margin": margin,
            }),
        ),
    };
    json!({
        "rule": rule,
        "at": reason.at,
        "preemptor": party(snapshot, &reason.preemptor),
        "victim": party(snapshot, &reason.victim),
        "split": split,
        "victim_started_at": reason.victim_started_at,
        "victim_min_runtime_s": reason.victim_min_runtime,
        "victim_protected_until": reason.victim_protected_until,
        "then": after_stop(then),
    })
}

pub fn drain(snapshot: &Snapshot, reason: &DrainReason, then: AfterStop) -> Value {
    let rule = match reason.rule {
        DrainRule::HostCordoned => "host-cordoned",
        DrainRule::HostUnhealthy => "host-unhealthy",
        DrainRule::HostDown => "host-down",
    };
    json!({
        "rule": rule,
        "at": reason.at,
        "node": snapshot.node_row(reason.node).name,
        "node_reason": snapshot.node_row(reason.node).health_reason,
        "victim": party(snapshot, &reason.victim),
        "victim_min_runtime_s": reason.victim_min_runtime,
        "victim_protected_until": reason.victim_protected_until,
        "then": after_stop(then),
    })
}

pub fn protection(protection: Protection) -> Option<i64> {
    match protection {
        Protection::Until(t) => Some(t),
        Protection::None | Protection::UntilDone => None,
    }
}

pub fn after_stop(then: AfterStop) -> &'static str {
    match then {
        AfterStop::Requeue => "requeued",
        AfterStop::EndPreempted => "ended-preempted",
        AfterStop::Fail => "failed",
    }
}

/// JSON has no infinity: an unfunded leaf's ratio is reported as null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some((x * 10_000.0).round() / 10_000.0)
}
