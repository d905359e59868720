//! Workloads as the pages see them: DTOs, server functions, and the sentences built from the
//! scheduler's reason data.

pub mod api;
pub mod duration;
pub mod reasons;
pub mod sentences;

use reasons::{Event, WaitingFor};
use serde::{Deserialize, Serialize};

/// Where a workload is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// Stopped to make room and not resumable.
    Preempted,
}

crate::named!(WorkloadState, "workload state",
    Queued => "queued", Running => "running", Succeeded => "succeeded", Failed => "failed",
    Cancelled => "cancelled", Preempted => "preempted");

impl WorkloadState {
    /// What the state filter offers for it, in words that say what falls under it.
    pub fn filter_label(self) -> &'static str {
        match self {
            WorkloadState::Queued => "Queued (requeued after preemption too)",
            WorkloadState::Running => "Running",
            WorkloadState::Succeeded => "Succeeded",
            WorkloadState::Failed => "Failed",
            WorkloadState::Cancelled => "Cancelled",
            WorkloadState::Preempted => "Preempted and ended (not resumable)",
        }
    }

    /// The empty list under this filter, said plainly.
    pub fn none_in(self) -> &'static str {
        match self {
            WorkloadState::Queued => "No workloads are waiting.",
            WorkloadState::Running => "No workloads are running.",
            WorkloadState::Succeeded => "No workloads have succeeded yet.",
            WorkloadState::Failed => "No workloads have failed.",
            WorkloadState::Cancelled => "No workloads were cancelled.",
            WorkloadState::Preempted => {
                "No workloads ended by preemption. Resumable work that was preempted goes back \
                 to the queue (its page says why), so it is listed as queued or running."
            }
        }
    }

    /// Queued or running: it may still take GPUs.
    pub fn is_active(self) -> bool {
        matches!(self, WorkloadState::Queued | WorkloadState::Running)
    }
}

/// A workload row (also the JSON API's workload object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadView {
    pub id: i64,
    pub name: String,
    pub project: String,
    pub owner: String,
    pub command: String,
    pub gpus: i64,
    pub min_runtime_s: i64,
    pub resumable: bool,
    pub priority: i64,
    pub state: WorkloadState,
    pub submitted_at: i64,
    pub first_started_at: Option<i64>,
    pub started_at: Option<i64>,
    pub protected_until: Option<i64>,
    pub ended_at: Option<i64>,
    pub exit_code: Option<i64>,
    pub run_count: i64,
    pub progress_s: i64,
    /// The cluster it runs on.
    #[serde(default)]
    pub cluster: String,
    /// Running with its GPUs nearly idle this long (see [`Utilization::idle_for`]); set on
    /// lists, so an owner sees it where they look.
    #[serde(default)]
    pub idle_for_s: Option<i64>,
    #[serde(skip)]
    pub user_id: i64,
}

impl WorkloadView {
    /// Holding GPUs it has not used for [`IDLE_FLAG_S`] or more.
    pub fn squatting(&self) -> bool {
        self.idle_for_s.is_some_and(|s| s >= IDLE_FLAG_S)
    }

    pub fn is_active(&self) -> bool {
        self.state.is_active()
    }
}

/// One entry of a workload's timeline (`{"at", "kind", "detail"}` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    pub at: i64,
    #[serde(flatten)]
    pub event: Event,
}

/// GPUs a workload holds on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuPlacement {
    pub node: String,
    pub gpus: Vec<u32>,
}

/// One level of a queued workload's path: how served it is and where it stands among siblings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRatio {
    pub path: String,
    pub usage_gpu_h: f64,
    pub allocated_gpu_h: f64,
    /// `None` when nothing was funded in the window.
    pub ratio: Option<f64>,
    /// The same over the last hours (the engine's recent window); siblings are ordered by the
    /// two blended, mostly the week's.
    pub recent_ratio: Option<f64>,
    pub sibling_rank: u32,
    pub siblings: u32,
    /// The sibling ranked first at this level, when it is not this node.
    pub ahead: Option<AheadSibling>,
}

/// Who goes ahead at one level of a waiting workload's path, and why (its ratios).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AheadSibling {
    pub path: String,
    pub ratio: Option<f64>,
    pub recent_ratio: Option<f64>,
}

/// Why a queued workload waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueExplanation {
    pub position: usize,
    pub queue_len: usize,
    pub leaf_rank: u32,
    pub path: Vec<PathRatio>,
    pub waiting_for: WaitingFor,
}

/// Everything the Workload page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadDetail {
    #[serde(flatten)]
    pub workload: WorkloadView,
    pub placement: Vec<GpuPlacement>,
    pub queue: Option<QueueExplanation>,
    pub events: Vec<EventView>,
    pub log_tail: String,
    pub can_cancel: bool,
    /// Ended, and the reader is its owner: a resubmission charges the same project as before.
    #[serde(default)]
    pub can_resubmit: bool,
    /// How many times it started, how long it ran in all (to now if running), and the GPU-hours
    /// charged to its project for it (free runs are not charged).
    #[serde(default)]
    pub runs: i64,
    #[serde(default)]
    pub ran_s: i64,
    #[serde(default)]
    pub charged_gpu_h: f64,
    /// When retention cleared its output, and deleted its events other than preemptions.
    #[serde(default)]
    pub output_removed_at: Option<i64>,
    #[serde(default)]
    pub events_removed_at: Option<i64>,
    /// Running on a node being drained (cordoned or unhealthy): when it will be stopped.
    #[serde(default)]
    pub leaving: Option<Leaving>,
    /// Queued: when it is likely to start (see [`StartEstimate`]).
    #[serde(default)]
    pub estimated_start: Option<StartEstimate>,
    /// How much of its GPUs it used, as the agents sampled them (none on nodes that cannot be
    /// sampled, or before the first sample).
    #[serde(default)]
    pub utilization: Option<Utilization>,
}

/// A workload's GPU utilization over its runs: the mean of every sample of its GPUs, and the
/// same per 5-minute bucket (`(bucket start, fraction)`), oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Utilization {
    /// 0–1.
    pub mean: f64,
    pub samples: i64,
    pub series: Vec<(i64, f64)>,
    /// Running, with its GPUs nearly idle (under [`IDLE_BELOW`]) in every sampled 5 minutes for
    /// this long up to now: after [`IDLE_FLAG_S`], its owner is told it holds GPUs it does not
    /// use.
    #[serde(default)]
    pub idle_for_s: Option<i64>,
    /// Made up by the demo's simulated nodes, not measured.
    #[serde(default)]
    pub simulated: bool,
}

/// Utilization below this counts as idle.
pub const IDLE_BELOW: f64 = 0.05;
/// Idle this long, a running workload is flagged to its owner.
pub const IDLE_FLAG_S: i64 = 3600;

impl Utilization {
    /// How long the series has been idle up to `now`: the trailing buckets under
    /// [`IDLE_BELOW`], from the first of them to `now`, if the last bucket is recent (a bucket of
    /// `bucket_s` seconds at most two widths old), else `None`.
    pub fn idle_for(series: &[(i64, f64)], now: i64, bucket_s: i64) -> Option<i64> {
        let &(last, _) = series.last()?;
        if now - last > 2 * bucket_s {
            return None;
        }
        let first_idle = series
            .iter()
            .rev()
            .take_while(|(_, f)| *f < IDLE_BELOW)
            .last()?
            .0;
        Some(now - first_idle)
    }

    /// Whether its owner should hear that it holds GPUs it does not use.
    pub fn squatting(&self) -> bool {
        self.idle_for_s.is_some_and(|s| s >= IDLE_FLAG_S)
    }
}

/// When a queued workload is likely to start: the scheduler run forward, as of `as_of`, over the
/// queue as it stood, with each project's median run time of its recent work. `at` is the
/// projected start, or `None` when it had not started by `until`, where the projection stopped.
/// Work submitted later that ranks ahead can only make it later.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StartEstimate {
    pub at: Option<i64>,
    pub until: i64,
    pub as_of: i64,
}

/// A running workload's node is leaving service: it is stopped at `at`, when its minimum
/// runtime ends (at once if that has passed or it runs for free), then queued again if it is
/// resumable or ended if not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leaving {
    pub node: String,
    pub state: crate::nodes::NodeHealth,
    pub at: i64,
}

/// A row of the Queue page, in scheduler order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub position: usize,
    pub workload: WorkloadView,
    pub allocated: bool,
    pub leaf_rank: u32,
    pub leaf_ratio: Option<f64>,
    #[serde(default)]
    pub estimated_start: Option<StartEstimate>,
}

/// The Queue page: the first rows in scheduler order, and how many wait in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub rows: Vec<QueueRow>,
    pub total: usize,
}

/// What the Submit form offers the signed-in person: the projects they may charge and the
/// cluster's cap on minimum runtimes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitOptions {
    pub projects: Vec<String>,
    pub max_min_runtime_s: i64,
    /// The clusters to choose from (a menu when there are several).
    #[serde(default)]
    pub clusters: Vec<String>,
}

/// The Submit form's fields, as typed (the server validates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitForm {
    pub project: String,
    pub name: String,
    pub command: String,
    pub gpus: String,
    /// As typed: `15 min`, `2h`, `1h30m`, or a bare number of minutes.
    pub min_runtime: String,
    pub resumable: bool,
    pub priority: String,
    /// Blank when there is one cluster.
    #[serde(default)]
    pub cluster: String,
}

#[cfg(test)]
mod utilization_tests {
    use super::Utilization;

    #[test]
    fn a_workload_is_idle_from_its_first_trailing_idle_bucket_while_samples_keep_coming() {
        let busy_then_idle = [(0, 0.9), (300, 0.02), (600, 0.0), (900, 0.01)];
        assert_eq!(
            Utilization::idle_for(&busy_then_idle, 1_000, 300),
            Some(700)
        );
        // Busy at the end: not idle.
        assert_eq!(
            Utilization::idle_for(&[(0, 0.0), (300, 0.5)], 400, 300),
            None
        );
        // No recent sample (its node went quiet): nothing to say.
        assert_eq!(Utilization::idle_for(&[(0, 0.0)], 3_600, 300), None);
        let hour_idle = Utilization {
            mean: 0.01,
            samples: 720,
            series: Vec::new(),
            idle_for_s: Some(3_600),
            simulated: false,
        };
        assert!(hour_idle.squatting());
        assert!(!Utilization {
            idle_for_s: Some(3_599),
            ..hour_idle.clone()
        }
        .squatting());
    }
}
