//! Reports: DTOs of the quarterly review and usage series, and their server functions.

pub mod api;
pub mod explain;

use crate::workloads::reasons::StopRule;
use serde::{Deserialize, Serialize};

/// How long each bucket of a chart or series is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    Hour,
    Day,
    /// Weeks from Monday 00:00 UTC.
    Week,
}

impl Granularity {
    /// The stable name, as in the JSON API and the CSV export's query.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Week => "week",
        }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One person's use of a project's GPUs over a period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonUsage {
    pub username: String,
    /// Workloads of theirs that ran in the period.
    pub workloads: i64,
    /// GPU-hours of funded (allocated) runs, charged to the project.
    pub delivered_gpu_h: f64,
    /// GPU-hours of free runs.
    pub unallocated_gpu_h: f64,
    /// The mean utilization of their sampled runs (0–1), if any was sampled.
    pub utilization: Option<f64>,
}

/// The review's headline (DESIGN §5), the figures the reference reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// `Σ min(delivered, owed) / Σ owed` over the teams (leaves with something owed).
    pub delivered_over_owed: Option<f64>,
    /// The worst team's `delivered / owed`, capped at 1.
    pub worst_team: Option<f64>,
    pub teams: usize,
    pub teams_at_95pct: usize,
    /// `Σ_h min(charged_h, owed_h) / Σ_h owed_h`.
    pub hourly: Option<f64>,
    pub occupancy: Option<f64>,
    pub unallocated_fraction: Option<f64>,
    pub debug_p90_wait_s: Option<i64>,
    /// Mean GPU utilization of the time the agents sampled (0–1; `None`: nothing sampled).
    #[serde(default)]
    pub utilization: Option<f64>,
    /// The GPU-hours the agents sampled (the utilization's basis).
    #[serde(default)]
    pub sampled_gpu_h: f64,
    /// The healthy GPU-hours of the period.
    #[serde(default)]
    pub capacity_gpu_h: f64,
}

/// One cluster's headline in a review of every cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterHeadline {
    pub name: String,
    pub headline: Headline,
}

/// One tree node's quarter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRow {
    pub path: String,
    pub depth: usize,
    pub leaf: bool,
    /// Its share of the cluster over the period: the shares in force hour by hour, weighted by
    /// the healthy capacity of each hour (funded ÷ capacity). With no capacity recorded, the
    /// share at the period's end.
    pub fraction: f64,
    /// Its share when the period began and when it ended (or now, for the current period);
    /// they differ when a change took effect within the period.
    pub share_at_start: f64,
    pub share_at_end: f64,
    pub funded_gpu_h: f64,
    pub owed_gpu_h: f64,
    pub delivered_gpu_h: f64,
    pub delivered_over_owed: Option<f64>,
    pub unallocated_gpu_h: f64,
    pub wait_p50_s: Option<i64>,
    pub wait_p90_s: Option<i64>,
    /// Mean GPU utilization of its sampled GPU time (0–1; `None`: nothing sampled), and that
    /// time weighted by it: "delivered 1,200 GPU-h at 63%".
    #[serde(default)]
    pub utilization: Option<f64>,
    #[serde(default)]
    pub utilized_gpu_h: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub from: i64,
    pub to: i64,
    pub label: String,
    pub headline: Headline,
    pub rows: Vec<ReviewRow>,
    /// The first hour anything was recorded (`None`: nothing yet): the page offers no earlier
    /// year.
    pub data_since: Option<i64>,
    /// The fiscal `(year, quarter)` reviewed; `None` for any other period.
    #[serde(default)]
    pub quarter: Option<(i32, u32)>,
    /// The month the organisation's fiscal year starts in (1 = January): the quarters offered.
    #[serde(default = "crate::calendar::january")]
    pub fiscal_start_month: u32,
    /// The cluster reviewed; `None`: every cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Each cluster's headline, when every cluster is reviewed and there are several.
    #[serde(default)]
    pub clusters: Vec<ClusterHeadline>,
}

/// Each program's and project's quarters side by side, oldest first: the quarter-over-quarter
/// trend leadership reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    pub quarters: Vec<TrendQuarter>,
    /// Tree order (the latest quarter's), one cell per quarter.
    pub rows: Vec<TrendRow>,
}

/// One fiscal quarter of a [`Trend`] and its headline ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendQuarter {
    pub year: i32,
    pub quarter: u32,
    pub label: String,
    pub from: i64,
    pub to: i64,
    pub delivered_over_owed: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendRow {
    pub path: String,
    pub depth: usize,
    pub leaf: bool,
    pub cells: Vec<TrendCell>,
}

/// A node's quarter: zeros and `None` where the node did not exist yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrendCell {
    pub owed_gpu_h: f64,
    pub delivered_gpu_h: f64,
    pub delivered_over_owed: Option<f64>,
    pub utilization: Option<f64>,
}

/// One tree node's series over the buckets of a [`UsageSeries`], in GPU-hours per bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageLine {
    /// The node's path; empty for the whole cluster.
    pub path: String,
    pub funded: Vec<f64>,
    pub owed: Vec<f64>,
    pub delivered: Vec<f64>,
    pub unallocated: Vec<f64>,
}

/// Funded, owed, delivered and unallocated GPU-hours per bucket for a node (first line) and its
/// children (the following lines), over `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSeries {
    pub node: String,
    pub from: i64,
    pub to: i64,
    pub granularity: Granularity,
    /// Each bucket's start (epoch seconds).
    pub buckets: Vec<i64>,
    pub lines: Vec<UsageLine>,
    /// The moments in the period when the share of the node or of one of its children changed.
    #[serde(default)]
    pub share_changes: Vec<ShareMark>,
    /// The one cluster it covers; empty: every cluster together.
    #[serde(default)]
    pub cluster: String,
}

/// A share that changed: which node, when, and to what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareMark {
    pub at: i64,
    pub path: String,
    pub share: f64,
}

/// Percentiles of the waits of the workloads that first started in each bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitSeries {
    /// `all`, `debug` or `large`.
    pub class: String,
    pub p50_s: Vec<Option<i64>>,
    pub p90_s: Vec<Option<i64>>,
    pub p99_s: Vec<Option<i64>>,
}

/// Preemptions and drains of one reason per bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonSeries {
    /// The engine's rule: `fair-share`, `free-work`, `fast-lane`, `reserved`, `priority`,
    /// `host-cordoned`, …
    pub reason: StopRule,
    pub counts: Vec<u64>,
}

/// The cluster's queue, waits and preemptions over `[from, to)` per bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterActivity {
    pub from: i64,
    pub to: i64,
    pub granularity: Granularity,
    pub buckets: Vec<i64>,
    /// Workloads waiting to run, averaged over the bucket's elapsed time.
    pub queue_depth: Vec<f64>,
    /// GPUs those workloads asked for, averaged the same way.
    pub queued_gpus: Vec<f64>,
    /// The most workloads waiting at any one moment of the bucket.
    #[serde(default)]
    pub queue_peak: Vec<u32>,
    pub waits: Vec<WaitSeries>,
    pub preemptions: Vec<ReasonSeries>,
}
