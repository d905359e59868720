//! Workloads as the pages see them: DTOs, server functions, and the sentences built from the
//! scheduler's reason data.

pub mod api;
pub mod sentences;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    pub state: String,
    pub submitted_at: i64,
    pub first_started_at: Option<i64>,
    pub started_at: Option<i64>,
    pub protected_until: Option<i64>,
    pub ended_at: Option<i64>,
    pub exit_code: Option<i64>,
    pub run_count: i64,
    pub progress_s: i64,
    #[serde(skip)]
    pub user_id: i64,
}

impl WorkloadView {
    pub fn is_active(&self) -> bool {
        matches!(self.state.as_str(), "queued" | "running")
    }
}

/// One entry of a workload's timeline; `detail` holds the engine's reason data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    pub at: i64,
    pub kind: String,
    pub detail: Value,
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
    pub sibling_rank: u32,
    pub siblings: u32,
}

/// Why a queued workload waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueExplanation {
    pub position: usize,
    pub queue_len: usize,
    pub leaf_rank: u32,
    pub path: Vec<PathRatio>,
    /// `{"kind": "capacity" | "reserved-ahead" | …, …}`.
    pub waiting_for: Value,
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
}

/// A row of the Queue page, in scheduler order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub position: usize,
    pub workload: WorkloadView,
    pub allocated: bool,
    pub leaf_rank: u32,
    pub leaf_ratio: Option<f64>,
}

/// The Queue page: the first rows in scheduler order, and how many wait in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub rows: Vec<QueueRow>,
    pub total: usize,
}

/// The Submit form's fields, as typed (the server validates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitForm {
    pub project: String,
    pub name: String,
    pub command: String,
    pub gpus: String,
    pub min_runtime_s: String,
    pub resumable: bool,
    pub priority: String,
}

/// A GPU node with what holds each of its GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub gpu_model: String,
    pub gpus: i64,
    pub state: String,
    pub heartbeat_age_s: Option<i64>,
    /// Why the node's own health check failed, and since when.
    pub health_reason: Option<String>,
    pub unhealthy_since: Option<i64>,
    pub slots: Vec<GpuSlot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSlot {
    pub index: u32,
    pub holder: Option<GpuHolder>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHolder {
    pub workload_id: i64,
    pub name: String,
    pub project: String,
    /// Protected until this time; `None` for free (unallocated) work.
    pub protected_until: Option<i64>,
    pub allocated: bool,
}

/// A personal API token as listed (never the secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(sqlx::FromRow))]
pub struct TokenView {
    pub api_token_id: i64,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}
