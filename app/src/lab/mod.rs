//! The simulator lab: DTOs of a lab run (the three policies on one input) and its server functions.
//! The simulation itself runs on the server, in the `scheduler` crate the live system uses.

pub mod api;

use serde::{Deserialize, Serialize};

/// The policies a lab run compares, in order: their names in reports and their names in words.
pub const POLICIES: [(&str, &str); 3] = [
    ("fair-share", "Fair share"),
    ("priority", "Priority baseline"),
    ("slurm", "SLURM peer"),
];

/// A policy's name in words ("fair-share" → "Fair share").
pub fn policy_label(policy: &str) -> &'static str {
    POLICIES
        .iter()
        .find(|p| p.0 == policy)
        .map_or("Unknown policy", |p| p.1)
}

/// What a person asks the lab to simulate. Text fields are validated on the server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LabForm {
    /// `reference` (the generated reference-like scenario), `philly` or `upload`.
    pub source: String,
    /// The scenario's seed.
    pub seed: String,
    /// Days of the scenario or of the Philly trace.
    pub days: String,
    /// Uploaded files' contents (tree TOML, cluster TOML, trace CSV) when `source` is `upload`.
    pub tree: String,
    pub cluster: String,
    pub trace: String,
    /// The usage lookback window, e.g. `7d`.
    pub window: String,
    /// The cap on a workload's minimum runtime, e.g. `8h`.
    pub max_min_runtime: String,
}

/// The inputs the lab offers besides uploads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSources {
    /// Whether the server has the Philly trace to offer.
    pub philly: bool,
    /// Where the Philly trace comes from, in words, or why it is not offered.
    pub philly_note: String,
}

/// Where a lab run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabState {
    /// Behind another run (one runs at a time).
    Waiting,
    Running,
    Done,
    Failed,
}

impl LabState {
    pub fn as_str(self) -> &'static str {
        match self {
            LabState::Waiting => "waiting",
            LabState::Running => "running",
            LabState::Done => "done",
            LabState::Failed => "failed",
        }
    }

    /// Still to finish: the page keeps asking.
    pub fn is_open(self) -> bool {
        matches!(self, LabState::Waiting | LabState::Running)
    }
}

/// A lab run and, once done, its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRunView {
    pub id: u64,
    /// What was simulated, in words ("Reference-like scenario, seed 1, 30 days").
    pub label: String,
    pub requested_by: String,
    pub state: LabState,
    /// Steps done so far of `steps`.
    pub step: u32,
    pub steps: u32,
    /// What it is doing now, or did last.
    pub stage: String,
    /// Seconds since it started running (or its total run time once done).
    pub elapsed_s: f64,
    pub error: Option<String>,
    pub result: Option<LabResult>,
    /// The settings it ran with, in words ("7-day window, minimum runtimes capped at 8 h").
    #[serde(default)]
    pub parameters: String,
    /// When it was asked for (epoch seconds).
    #[serde(default)]
    pub requested_at: i64,
    /// Once done: the figures the list of runs shows.
    #[serde(default)]
    pub headline: Option<LabHeadline>,
}

/// A finished run's figures at a glance, by policy in [`POLICIES`] order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabHeadline {
    pub gpus: u32,
    pub workloads: u64,
    pub debug_p90_s: [Option<i64>; 3],
    /// The worst team's delivered ÷ owed.
    pub worst_team: [Option<f64>; 3],
}

impl LabResult {
    /// Its figures at a glance.
    pub fn headline(&self) -> LabHeadline {
        let p90 = |policy: &str| {
            self.waits
                .iter()
                .find(|w| w.class == "debug" && w.policy == policy)
                .and_then(|w| w.p90_s)
        };
        let worst = |i: usize| {
            self.teams
                .iter()
                .filter_map(|t| t.delivered_over_owed[i])
                .min_by(f64::total_cmp)
        };
        LabHeadline {
            gpus: self.gpus,
            workloads: self.workloads,
            debug_p90_s: POLICIES.map(|p| p90(p.0)),
            worst_team: [worst(0), worst(1), worst(2)],
        }
    }
}

/// The three policies' measures, side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabResult {
    pub gpus: u32,
    pub hosts: u32,
    pub horizon_s: i64,
    pub workloads: u64,
    /// The summary table: one row per measure, the policies in [`POLICIES`] order.
    pub measures: Vec<MeasureRow>,
    pub waits: Vec<WaitRow>,
    pub teams: Vec<TeamRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureRow {
    pub label: String,
    /// Indented under the row above (a detail of it).
    pub detail: bool,
    pub fair_share: String,
    pub priority: String,
    #[serde(default)]
    pub slurm: String,
    /// Whether fair share or the priority baseline does better on this measure and by how much,
    /// in words (`None` where the measure has no better direction).
    pub verdict: Option<String>,
    /// The same between fair share and the SLURM peer.
    #[serde(default)]
    pub verdict_slurm: Option<String>,
}

/// Wait percentiles of one class of workloads under one policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRow {
    /// `all`, `debug`, `large` or `requeue`.
    pub class: String,
    /// `fair-share`, `priority` or `slurm`.
    pub policy: String,
    pub count: u64,
    pub p50_s: Option<i64>,
    pub p90_s: Option<i64>,
    pub p99_s: Option<i64>,
}

/// One team (leaf): what it was owed and delivered under each policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamRow {
    pub path: String,
    pub fraction: f64,
    /// By policy, in [`POLICIES`] order.
    pub owed_gpu_h: [f64; 3],
    pub delivered_gpu_h: [f64; 3],
    pub delivered_over_owed: [Option<f64>; 3],
}

/// The run segments of the first GPUs over `[from, to)`: the data of the Gantt chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gantt {
    pub policy: String,
    pub from: i64,
    pub to: i64,
    pub horizon_s: i64,
    /// One label per row ("node-000 · GPU 0").
    pub rows: Vec<String>,
    /// Team paths; a bar's `team` indexes this list.
    pub teams: Vec<String>,
    pub bars: Vec<GanttBar>,
}

/// One run of a workload on one GPU, clipped to the chart's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GanttBar {
    pub row: u32,
    pub start: i64,
    pub end: i64,
    pub team: u32,
    /// Until when it could not be preempted (the bar is hatched after it); `None`: never protected.
    pub protected_until: Option<i64>,
    /// Ended by a preemption or a drain (drawn with a red right edge).
    pub preempted: bool,
    /// Ran on allocated time (charged to its team) rather than free on idle GPUs.
    pub allocated: bool,
    pub workload: String,
}
