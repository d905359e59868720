//! The engine's reasons in the contract the pages read (`app::workloads::reasons`): data, not
//! sentences. Ids become names and paths here, with the snapshot the decision was made on.

use super::snapshot::Snapshot;
use app::workloads::reasons as contract;
use app::workloads::GpuPlacement;
use scheduler::{
    AfterStop, DrainReason, DrainRule, NodeGpus, Party, PreemptReason, PreemptRule, Protection,
    WaitReason,
};

pub fn party(snapshot: &Snapshot, party: &Party) -> contract::Party {
    contract::Party {
        workload_id: party.workload.0 as i64,
        name: snapshot.workload(party.workload).map(|w| w.name.clone()),
        leaf: snapshot.tree.tree.path(party.leaf).to_string(),
        ratio: finite(party.ratio),
        priority: party.priority,
    }
}

pub fn preempt(snapshot: &Snapshot, reason: &PreemptReason, then: AfterStop) -> contract::Event {
    let (rule, split) = match reason.rule {
        PreemptRule::FreeWork => (contract::PreemptRule::FreeWork, None),
        PreemptRule::Priority => (contract::PreemptRule::Priority, None),
        PreemptRule::FastLane => (contract::PreemptRule::FastLane, None),
        PreemptRule::Reserved => (contract::PreemptRule::Reserved, None),
        PreemptRule::FairShare { split, margin } => (
            contract::PreemptRule::FairShare,
            Some(contract::Split {
                preemptor_side: snapshot.tree.tree.path(split.ours).to_string(),
                preemptor_side_ratio: finite(split.our_ratio),
                victim_side: snapshot.tree.tree.path(split.theirs).to_string(),
                victim_side_ratio: finite(split.their_ratio),
                margin,
            }),
        ),
    };
    contract::Event::Preempted(contract::Preemption {
        rule,
        at: reason.at,
        preemptor: party(snapshot, &reason.preemptor),
        victim: party(snapshot, &reason.victim),
        split,
        victim_started_at: Some(reason.victim_started_at),
        victim_min_runtime_s: reason.victim_min_runtime,
        victim_protected_until: reason.victim_protected_until,
        then: after_stop(then),
    })
}

pub fn drain(snapshot: &Snapshot, reason: &DrainReason, then: AfterStop) -> contract::Event {
    let rule = match reason.rule {
        DrainRule::HostCordoned => contract::DrainRule::HostCordoned,
        DrainRule::HostUnhealthy => contract::DrainRule::HostUnhealthy,
        DrainRule::HostDown => contract::DrainRule::HostDown,
    };
    let node = snapshot.node_row(reason.node);
    contract::Event::Drained(contract::Drain {
        rule,
        at: reason.at,
        node: node.name.clone(),
        node_reason: node.health_reason.clone(),
        victim: Some(party(snapshot, &reason.victim)),
        victim_min_runtime_s: reason.victim_min_runtime,
        victim_protected_until: reason.victim_protected_until,
        note: None,
        then: after_stop(then),
    })
}

/// What a queued workload waits for, with nodes and workloads by name.
pub fn waiting_for(snapshot: &Snapshot, reason: &WaitReason) -> contract::WaitingFor {
    use contract::WaitingFor as W;
    let gpus = |parts: &[NodeGpus]| placement(snapshot, parts);
    match reason {
        WaitReason::StartsNow { placement } => W::StartsNow {
            placement: gpus(&placement.parts),
        },
        WaitReason::OwnReservation { at, gpus: held } => W::OwnReservation {
            at: *at,
            gpus: gpus(held),
        },
        WaitReason::ReservedAhead { holder, at } => W::ReservedAhead {
            holder: holder.0 as i64,
            holder_name: snapshot.workload(*holder).map(|w| w.name.clone()),
            at: *at,
        },
        WaitReason::Capacity {
            idle_gpus,
            protected_gpus,
            protected_until,
            outranking_gpus,
            within_margin_gpus,
            holders,
        } => W::Capacity {
            idle_gpus: *idle_gpus,
            protected_gpus: *protected_gpus,
            protected_until: *protected_until,
            outranking_gpus: *outranking_gpus,
            within_margin_gpus: *within_margin_gpus,
            holders: holders
                .iter()
                .map(|&(id, at)| {
                    let row = snapshot.workload(id);
                    contract::Holder {
                        workload_id: id.0 as i64,
                        name: row.map(|w| w.name.clone()),
                        project: row
                            .map(|w| snapshot.leaf_path(w.budget_node_id))
                            .unwrap_or_default(),
                        gpus: row.map_or(0, |w| w.gpus as u32),
                        preemptible_at: at,
                    }
                })
                .collect(),
        },
        WaitReason::IdleOnly {
            idle_gpus,
            resumable_ahead,
            funded_waiting,
        } => W::IdleOnly {
            idle_gpus: *idle_gpus,
            resumable_ahead: *resumable_ahead,
            funded_waiting: *funded_waiting,
        },
        WaitReason::Headroom { kept_gpus } => W::Headroom {
            kept_gpus: *kept_gpus,
        },
        WaitReason::HostsOutOfService { nodes } => W::HostsOutOfService {
            nodes: nodes
                .iter()
                .map(|n| snapshot.node_row(*n).name.clone())
                .collect(),
        },
        WaitReason::TooLarge {
            gpus,
            largest_placement,
        } => W::TooLarge {
            gpus: *gpus,
            largest_placement: *largest_placement,
        },
    }
}

/// GPUs on each node, by node name.
pub fn placement(snapshot: &Snapshot, parts: &[NodeGpus]) -> Vec<GpuPlacement> {
    parts
        .iter()
        .map(|p| GpuPlacement {
            node: snapshot.node_row(p.node).name.clone(),
            gpus: p.gpus.indices().collect(),
        })
        .collect()
}

pub fn protection(protection: Protection) -> Option<i64> {
    match protection {
        Protection::Until(t) => Some(t),
        Protection::None | Protection::UntilDone => None,
    }
}

pub fn after_stop(then: AfterStop) -> contract::AfterStop {
    match then {
        AfterStop::Requeue => contract::AfterStop::Requeued,
        AfterStop::EndPreempted => contract::AfterStop::EndedPreempted,
        AfterStop::Fail => contract::AfterStop::Failed,
    }
}

/// JSON has no infinity: an unfunded leaf's ratio is reported as null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some((x * 10_000.0).round() / 10_000.0)
}
