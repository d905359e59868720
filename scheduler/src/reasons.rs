//! What the engine decides, and why, as data a UI can turn into a sentence.

use crate::cluster::{NodeGpus, Placement};
use crate::ids::{BudgetId, NodeId, Time, WorkloadId};
use crate::ranking::LevelComparison;

/// The result of one decision pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Drains first, then, for each workload started, the preemptions that made room and its start.
    pub actions: Vec<Action>,
    /// GPUs held for blocked workloads (DESIGN §4.8), best-ranked first.
    pub reservations: Vec<Reservation>,
    /// The next moment the engine must be asked again even if nothing else happens: a protection
    /// ending that matters, a drain falling due, a reservation's start. Always after `now`.
    ///
    /// Work this decision stops and requeues is not placed again within it: a driver that
    /// requeues anything should decide again at the same `now` once it has applied the actions.
    pub next_wake: Option<Time>,
    /// Whether a pass at the same `now`, after these actions are applied, could decide anything
    /// more: this one requeued allocated work (free work waits for that pass rather than start
    /// where the requeued work would preempt it), or requeued free work that idle GPUs could
    /// take. Drivers follow it through [`crate::Settle`].
    pub decide_again: bool,
}

/// One thing for the driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Start the workload on these GPUs.
    Start {
        workload: WorkloadId,
        placement: Placement,
        protection: Protection,
    },
    /// Stop the workload to make room for another.
    Preempt {
        workload: WorkloadId,
        reason: PreemptReason,
        then: AfterStop,
    },
    /// Stop the workload because its host is leaving service (DESIGN §4.9).
    Drain {
        workload: WorkloadId,
        reason: DrainReason,
        then: AfterStop,
    },
}

impl Action {
    pub fn workload(&self) -> WorkloadId {
        match self {
            Action::Start { workload, .. }
            | Action::Preempt { workload, .. }
            | Action::Drain { workload, .. } => *workload,
        }
    }
}

/// How long a started workload is safe from preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Unallocated (or, in the baseline, over its leaf's cap): preemptible at once.
    None,
    /// Allocated: protected until this time (`started_at + min_runtime`).
    Until(Time),
    /// The priority baseline's protected work: never preempted. Echo it back as
    /// [`crate::RunningWorkload::baseline_protected`].
    UntilDone,
}

/// What becomes of a stopped workload (DESIGN §4.7, §4.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterStop {
    /// Resumable: back to the queue with its progress.
    Requeue,
    /// Not resumable: ends in state `preempted`; its user resubmits.
    EndPreempted,
    /// Not resumable and its host went down: ends in state `failed`.
    Fail,
}

impl AfterStop {
    pub(crate) fn after_preemption(resumable: bool) -> AfterStop {
        if resumable {
            AfterStop::Requeue
        } else {
            AfterStop::EndPreempted
        }
    }
}

/// A workload and its leaf's standing when the decision was made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Party {
    pub workload: WorkloadId,
    pub leaf: BudgetId,
    /// The leaf's `usage / allocated` at that moment.
    pub ratio: f64,
    pub priority: i32,
}

/// Which rule allowed a preemption.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PreemptRule {
    /// The victim was unallocated (free) work, preemptible by any allocated workload.
    FreeWork,
    /// Fair share: where the two leaves' paths part, the victim's side was over-served relative to
    /// the preemptor's by more than the damping margin, and the victim's minimum runtime had passed.
    FairShare { split: LevelComparison, margin: f64 },
    /// The priority baseline: a protected start of equal or higher priority took preemptible work.
    Priority,
    /// The fast lane (DESIGN §4.11): a debug workload took the GPUs of resumable work whose
    /// minimum runtime had passed, whatever its leaf; the time is charged to the debug work's leaf.
    FastLane,
    /// Reserved GPUs (DESIGN §4.8): a multi-host workload among those offered a reservation took
    /// resumable work behind it in the queue whose minimum runtime had passed (work that may start
    /// on reserved GPUs only knowing it will be preemptible by then).
    Reserved,
}

impl PreemptRule {
    /// The rule's stable name in reports and event details.
    pub fn name(&self) -> &'static str {
        match self {
            PreemptRule::FreeWork => "free-work",
            PreemptRule::FairShare { .. } => "fair-share",
            PreemptRule::Priority => "priority",
            PreemptRule::FastLane => "fast-lane",
            PreemptRule::Reserved => "reserved",
        }
    }
}

/// Why a workload was preempted: enough for "preempted at 14:02 by olmo-pretrain-7 (project a1,
/// ratio 0.41) because your project b2 was at ratio 1.37 and your 2 h minimum runtime had passed".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PreemptReason {
    pub rule: PreemptRule,
    pub at: Time,
    pub preemptor: Party,
    pub victim: Party,
    pub victim_started_at: Time,
    pub victim_min_runtime: Time,
    /// `None` for unallocated victims; otherwise in the past (protected work is never preempted).
    pub victim_protected_until: Option<Time>,
}

/// Which host state forced a drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainRule {
    HostCordoned,
    HostUnhealthy,
    /// Drained at once, protection or not.
    HostDown,
}

/// Why a workload was drained off a host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DrainReason {
    pub rule: DrainRule,
    pub at: Time,
    pub node: NodeId,
    pub victim: Party,
    pub victim_min_runtime: Time,
    pub victim_protected_until: Option<Time>,
}

/// GPUs held for a blocked workload until `at`, when the work on them will have finished or become
/// preemptible by it. Other work starts there only if it will be preemptible by then.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    pub workload: WorkloadId,
    pub at: Time,
    pub gpus: Vec<NodeGpus>,
}
