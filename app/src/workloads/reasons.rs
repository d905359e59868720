//! The "why did this wait or stop" contract, typed end to end: the server converts the engine's
//! reasons into these, stores and serves them as JSON (kebab-case tags, the JSON API's shape), and
//! the pages turn them into sentences (`sentences.rs`).

use super::GpuPlacement;
use serde::{Deserialize, Serialize};

/// One workload of a preemption, with its leaf's standing at that moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Party {
    pub workload_id: i64,
    pub name: Option<String>,
    pub leaf: String,
    /// The leaf's `usage / allocated`; `None` when nothing was funded (JSON has no infinity).
    pub ratio: Option<f64>,
    #[serde(default)]
    pub priority: i32,
}

/// What became of a stopped workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterStop {
    /// Back to the queue with its progress.
    Requeued,
    /// Not resumable: it ended, preempted.
    EndedPreempted,
    /// Not resumable: it failed.
    Failed,
}

/// The rule that allowed a preemption (DESIGN §4.6, §4.8, §4.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreemptRule {
    FreeWork,
    FairShare,
    Priority,
    FastLane,
    Reserved,
}

impl PreemptRule {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptRule::FreeWork => "free-work",
            PreemptRule::FairShare => "fair-share",
            PreemptRule::Priority => "priority",
            PreemptRule::FastLane => "fast-lane",
            PreemptRule::Reserved => "reserved",
        }
    }
}

/// Where the two leaves' paths part in a fair-share preemption, and how served each side was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub preemptor_side: String,
    pub preemptor_side_ratio: Option<f64>,
    pub victim_side: String,
    pub victim_side_ratio: Option<f64>,
    pub margin: f64,
}

/// Why a workload was preempted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preemption {
    pub rule: PreemptRule,
    pub at: i64,
    pub preemptor: Party,
    pub victim: Party,
    /// Only for [`PreemptRule::FairShare`].
    pub split: Option<Split>,
    #[serde(default)]
    pub victim_started_at: Option<i64>,
    #[serde(default)]
    pub victim_min_runtime_s: i64,
    #[serde(default)]
    pub victim_protected_until: Option<i64>,
    pub then: AfterStop,
}

/// Why a workload's node stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainRule {
    HostCordoned,
    HostUnhealthy,
    HostDown,
    /// The node's agent stopped its runs (it shut down, or lost the server).
    AgentStopped,
}

impl DrainRule {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainRule::HostCordoned => "host-cordoned",
            DrainRule::HostUnhealthy => "host-unhealthy",
            DrainRule::HostDown => "host-down",
            DrainRule::AgentStopped => "agent-stopped",
        }
    }
}

/// The rule behind any stop, preemption or drain: `"fair-share"`, `"host-down"`, … in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StopRule {
    Preempt(PreemptRule),
    Drain(DrainRule),
}

impl StopRule {
    pub fn as_str(self) -> &'static str {
        match self {
            StopRule::Preempt(rule) => rule.as_str(),
            StopRule::Drain(rule) => rule.as_str(),
        }
    }
}

/// Why a workload was drained from its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    pub rule: DrainRule,
    pub at: i64,
    pub node: String,
    /// The node's own health report, when it failed its check.
    #[serde(default)]
    pub node_reason: Option<String>,
    /// The engine's view of the stopped workload (absent when its agent stopped it).
    #[serde(default)]
    pub victim: Option<Party>,
    #[serde(default)]
    pub victim_min_runtime_s: i64,
    #[serde(default)]
    pub victim_protected_until: Option<i64>,
    /// What the agent said, for [`DrainRule::AgentStopped`].
    #[serde(default)]
    pub note: Option<String>,
    pub then: AfterStop,
}

/// One entry of a workload's timeline: `{"kind": "started", "detail": {…}}` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "kebab-case")]
pub enum Event {
    Submitted {
        by: String,
    },
    Started {
        placement: Vec<GpuPlacement>,
        protected_until: Option<i64>,
        #[serde(default)]
        resumed: bool,
        #[serde(default)]
        wait_s: i64,
    },
    Preempted(Preemption),
    Drained(Drain),
    Succeeded {
        #[serde(default)]
        exit_code: Option<i32>,
        #[serde(default)]
        note: Option<String>,
    },
    Failed {
        #[serde(default)]
        exit_code: Option<i32>,
        #[serde(default)]
        note: Option<String>,
    },
    Cancelled {
        by: String,
    },
}

impl Event {
    /// The kind's stable name (`started`, `preempted`, …), as stored and shown.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Submitted { .. } => "submitted",
            Event::Started { .. } => "started",
            Event::Preempted(_) => "preempted",
            Event::Drained(_) => "drained",
            Event::Succeeded { .. } => "succeeded",
            Event::Failed { .. } => "failed",
            Event::Cancelled { .. } => "cancelled",
        }
    }

    /// The detail alone, as stored in the event's `detail` column.
    pub fn detail_json(&self) -> String {
        let tagged = serde_json::to_value(self).expect("events serialize");
        tagged["detail"].to_string()
    }

    /// Rebuilds an event from its stored kind and detail.
    pub fn from_parts(kind: &str, detail: &str) -> Result<Event, serde_json::Error> {
        let detail: serde_json::Value = serde_json::from_str(detail)?;
        serde_json::from_value(serde_json::json!({ "kind": kind, "detail": detail }))
    }
}

/// What a queued workload waits for: `{"kind": "capacity", …}` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WaitingFor {
    /// Nothing: it starts on the next pass, here.
    StartsNow { placement: Vec<GpuPlacement> },
    /// GPUs are reserved for it from `at`.
    OwnReservation { at: i64, gpus: Vec<GpuPlacement> },
    /// The GPUs it fits on are reserved for a workload ahead of it.
    ReservedAhead {
        holder: i64,
        holder_name: Option<String>,
        at: i64,
    },
    /// Not enough GPUs it may take.
    Capacity {
        idle_gpus: u32,
        protected_gpus: u32,
        protected_until: Option<i64>,
        outranking_gpus: u32,
        within_margin_gpus: u32,
        /// Who holds the GPUs it needs: the work it may preempt soonest, then the largest work
        /// ranked at least as well as its own.
        #[serde(default)]
        holders: Vec<Holder>,
    },
    /// Free work: only idle GPUs, after all funded work; if it cannot resume, after the free work
    /// that can (`resumable_ahead` of which wait), and only while no funded work waits
    /// (`funded_waiting`: some does).
    IdleOnly {
        idle_gpus: u32,
        #[serde(default)]
        resumable_ahead: u32,
        #[serde(default)]
        funded_waiting: bool,
    },
    /// It would take the last GPUs kept for short debug work.
    Headroom { kept_gpus: u32 },
    /// It fits only on nodes that take no new work.
    HostsOutOfService { nodes: Vec<String> },
    /// No placement on this cluster is that large.
    TooLarge { gpus: u32, largest_placement: u32 },
}

/// A running workload holding GPUs a waiting one needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub workload_id: i64,
    pub name: Option<String>,
    pub project: String,
    pub gpus: u32,
    /// When the waiting workload may preempt it (its minimum runtime ends); `None` when it may
    /// not: its project ranks at least as well, or within the damping margin.
    pub preemptible_at: Option<i64>,
}
