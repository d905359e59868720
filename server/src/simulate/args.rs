//! `hourglass simulate …` flags (DESIGN §6).

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Replay a trace through the scheduler, or write inputs for one.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,

    /// The budget tree: a `[shares]` table of `"program/project" = share`.
    #[arg(long, required = true)]
    pub tree: Option<PathBuf>,
    /// The hosts (`[[nodes]]`) and their outages (`[[outages]]`).
    #[arg(long, required = true)]
    pub cluster: Option<PathBuf>,
    /// Workloads: `id,submit_s,project,user,gpus,duration_s,min_runtime_s,resumable,priority`.
    #[arg(long, required = true)]
    pub trace: Option<PathBuf>,
    /// Which scheduler decides; `both` runs each on the same input and compares them.
    #[arg(long, value_enum, default_value = "fair-share")]
    pub policy: PolicyChoice,
    /// The fair-share lookback window (`7d`, `36h`, or seconds).
    #[arg(long, default_value = "7d")]
    pub window: String,
    /// Longer minimum runtimes in the trace are cut to this.
    #[arg(long, default_value = "8h")]
    pub max_min_runtime: String,
    /// Measure and stop here (default: the last submission).
    #[arg(long)]
    pub horizon: Option<String>,
    /// Write the JSON report here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write every run segment as CSV here (one policy only).
    #[arg(long)]
    pub timeline: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyChoice {
    FairShare,
    Priority,
    Both,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SimulateCommand {
    /// Generate a reference-like scenario (1,024 GPUs, 15 teams under 3 programs, one project at
    /// 35%, bursty seasons, debug work that says high priority, many debug workloads, free
    /// sweeps, outages) and write tree.toml, cluster.toml and trace.csv.
    Scenario {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 30)]
        days: u32,
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Convert the Philly trace (`vc,app_id,submit_time_s,num_gpus,duration_s`) into tree.toml,
    /// cluster.toml and trace.csv. Each VC is a team funded by its published capacity (8 GPUs if
    /// unlisted); the cluster is their sum. VC clocks start at 0 together; jobs after `--days` are
    /// dropped. Minimum runtime: 10 min for jobs of at most 15 min, otherwise a quarter of the run
    /// time within [30 min, 8 h], rounded up to 5 min. Resumable: jobs longer than an hour or on
    /// more than one GPU. Priority 0, no user.
    Philly {
        #[arg(long)]
        input: PathBuf,
        #[arg(long, default_value_t = 30)]
        days: u32,
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Run the scenario family under both policies: the reference-like month, an 88-GPU cluster
    /// at 3x demand, 4,096 GPUs, a gang-heavy and a debug-heavy mix, interactive sessions, and
    /// (with --philly) the Philly trace. Writes each member's inputs and report.json into its own
    /// folder of --out-dir, and matrix.md, the table printed at the end.
    Matrix {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 30)]
        days: u32,
        /// The Philly trace (`philly_by_vc.csv`), converted as `simulate philly` does.
        #[arg(long)]
        philly: Option<PathBuf>,
        #[arg(long)]
        out_dir: PathBuf,
    },
}
