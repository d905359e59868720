//! The discrete-event simulator (DESIGN §5–§6): replays a trace of workloads on a simulated
//! cluster through the same [`crate::Engine::decide`] pass the server runs, and measures the result.
//!
//! Pure like the engine: inputs are texts or values, outputs are values and strings; the caller
//! reads files, writes reports and times the run ([`report::Report::wall_s`]).
//!
//! ```
//! use scheduler::sim::{self, scenario::{generate, ScenarioConfig}, SimConfig, SimInput};
//!
//! let s = generate(&ScenarioConfig::small(7, 1, &["lang/pretrain", "vision/seg"]));
//! let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
//! let out = sim::run(&input, &SimConfig::default());
//! assert!(out.report.workloads.submitted > 0);
//! for seg in &out.segments {
//!     // seg.leaf, seg.start, seg.end, seg.gpus.count(), seg.allocated: enough for hourly buckets.
//!     assert!(seg.end >= seg.start);
//! }
//! ```
//!
//! How the clock moves: arrivals, completions, outage starts and ends, and the engine's own
//! `next_wake` are the only moments anything happens. At each, every event of that second is
//! applied, then the engine decides once; if the decision requeued work it decides again at the
//! same second. An arrival of free (unallocated) work that cannot fit on idle GPUs changes no
//! decision, so it does not trigger a pass. Charges open and close in the ledger as workloads start
//! and stop ([`crate::Ledger::start_charging`]); nothing is rescanned.

pub mod family;
pub mod files;
pub mod input;
mod measures;
pub mod philly;
pub mod report;
mod rigid;
pub(crate) mod rng;
mod run;
pub mod scenario;
pub mod timeline;
pub mod trace;

use std::fmt;

use crate::engine::{Config, Policy};
use crate::ids::{Time, DAY, HOUR};
use crate::slurm::SlurmConfig;
use crate::tree::BudgetTree;

pub use files::{parse_cluster, parse_tree, Cluster, ClusterNode, Outage};
pub use input::{parse_duration, InputError};
pub use measures::{DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};
pub use report::{
    both_json, preemption_reasons, reports_json, summary_table, DeliveredOverOwed, Report,
    TimeLimits, WaitStats,
};
pub use timeline::{timeline_csv, Segment, SegmentEnd, TIMELINE_HEADER};
pub use trace::{parse_trace, write_trace, TraceRecord, TraceRow, TRACE_HEADER};

/// The simulator's knobs. `SimConfig::default()`: fair share, 7-day window, 8-hour cap on
/// minimum runtime, horizon at the last submission.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimConfig {
    pub policy: Policy,
    /// The ledger's lookback window.
    pub window: Time,
    /// Longer minimum runtimes in the trace are cut to this.
    pub max_min_runtime: Time,
    /// Measures cover `[0, horizon]` and the run stops there. `None`: the last submission time.
    pub horizon: Option<Time>,
    /// The SLURM peer's settings (read only under [`Policy::Slurm`]).
    pub slurm: SlurmConfig,
    /// Every workload's time limit, for the SLURM peer's backfill: SLURM users over-estimate,
    /// so the limit is the trace's true duration times this (default 2), capped at
    /// [`SlurmConfig::max_wall`] but never below the true duration (the trace's work is done
    /// whole; a site would have it split into jobs that chain).
    pub time_limit_factor: f64,
    /// Fair share's margin for preempting work that cannot resume (`Config::kill_margin`; read
    /// as at least the damping margin).
    pub kill_margin: f64,
}

impl SimConfig {
    /// The time limit a workload of `duration` is submitted with.
    pub fn time_limit(&self, duration: Time) -> Time {
        let padded = (duration as f64 * self.time_limit_factor.max(1.0)).ceil() as Time;
        padded.min(self.slurm.max_wall).max(duration).max(1)
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            policy: Policy::FairShare,
            window: 7 * DAY,
            max_min_runtime: 8 * HOUR,
            horizon: None,
            slurm: SlurmConfig::default(),
            time_limit_factor: 2.0,
            kill_margin: Config::default().kill_margin,
        }
    }
}

/// Which input a problem was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFile {
    Tree,
    Cluster,
    Trace,
}

/// An input problem and the file it is in; the caller knows the file's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    pub file: InputFile,
    pub error: InputError,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = match self.file {
            InputFile::Tree => "tree",
            InputFile::Cluster => "cluster",
            InputFile::Trace => "trace",
        };
        write!(f, "{file}: {}", self.error)
    }
}

impl std::error::Error for FileError {}

/// A tree, a cluster and a trace that fit together.
#[derive(Clone, Debug)]
pub struct SimInput {
    pub tree: BudgetTree,
    pub cluster: Cluster,
    /// In file order.
    pub trace: Vec<TraceRow>,
}

impl SimInput {
    /// Parses the three texts of DESIGN §6.
    pub fn parse(tree: &str, cluster: &str, trace: &str) -> Result<SimInput, FileError> {
        let tree = parse_tree(tree).map_err(|error| FileError {
            file: InputFile::Tree,
            error,
        })?;
        let cluster = parse_cluster(cluster).map_err(|error| FileError {
            file: InputFile::Cluster,
            error,
        })?;
        let trace = parse_trace(trace, &tree).map_err(|error| FileError {
            file: InputFile::Trace,
            error,
        })?;
        SimInput::new(tree, cluster, trace)
    }

    /// Checks that every workload could run on this cluster.
    pub fn new(
        tree: BudgetTree,
        cluster: Cluster,
        trace: Vec<TraceRow>,
    ) -> Result<SimInput, FileError> {
        let total = cluster.total_gpus();
        if let Some(row) = trace.iter().find(|r| r.gpus > total) {
            return Err(FileError {
                file: InputFile::Trace,
                error: InputError::at(
                    row.line,
                    "gpus",
                    format!("{} GPUs asked for; the cluster has {total}", row.gpus),
                ),
            });
        }
        Ok(SimInput {
            tree,
            cluster,
            trace,
        })
    }
}

/// A run's report and every run segment, ordered by start time (then workload, host).
#[derive(Clone, Debug)]
pub struct SimOutput {
    pub report: Report,
    pub segments: Vec<Segment>,
}

/// Runs the trace under `config`. Deterministic: the same input and config give the same output
/// (`wall_s` is left 0 for the caller to fill in).
pub fn run(input: &SimInput, config: &SimConfig) -> SimOutput {
    let outcome = run::simulate(input, config);
    let report = measures::measure(input, config, &outcome);
    SimOutput {
        report,
        segments: outcome.segments,
    }
}
