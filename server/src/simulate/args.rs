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
    /// Which scheduler decides; `both` runs fair share and the priority baseline on the same
    /// input and compares them, `all` adds the SLURM peer.
    #[arg(long, value_enum, default_value = "fair-share")]
    pub policy: PolicyChoice,
    #[command(flatten)]
    pub slurm: SlurmArgs,
    /// Fair share takes unprotected work that cannot resume (its progress is lost) only where the
    /// running side's ratio exceeds the waiting side's by more than this (at least the damping
    /// margin, 0.02); resumable work by more than the damping margin.
    #[arg(long, default_value_t = scheduler::Config::default().kill_margin, allow_negative_numbers = true)]
    pub kill_margin: f64,
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
    /// A SLURM site's multifactor priority (Fair Tree), scavenger QOS and EASY backfill.
    Slurm,
    /// Fair share and the priority baseline.
    Both,
    /// Fair share, the priority baseline and the SLURM peer.
    All,
}

/// The SLURM peer's settings (`--policy slurm` or `all`): `slurm.conf`'s names in brackets.
#[derive(Debug, Clone, Args)]
pub struct SlurmArgs {
    /// Each workload's time limit is its true duration times this (users over-estimate).
    #[arg(long = "slurm-limit-factor", default_value_t = 2.0)]
    pub limit_factor: f64,
    /// Time limits are capped here, but never below the true duration (MaxTime).
    #[arg(long = "slurm-max-wall", default_value = "7d")]
    pub max_wall: String,
    /// Half-life of the usage fair share ranks by (PriorityDecayHalfLife).
    #[arg(long = "slurm-half-life", default_value = "7d")]
    pub half_life: String,
    /// Every queued job's priority is recalculated this often; a job submitted in between gets
    /// its priority at submission; 0 recalculates at every decision (PriorityCalcPeriod).
    #[arg(long = "slurm-calc-period", default_value = "5m")]
    pub calc_period: String,
    /// Queued this long, a job's age factor is 1 (PriorityMaxAge).
    #[arg(long = "slurm-max-age", default_value = "7d")]
    pub max_age: String,
    /// PriorityWeightFairshare.
    #[arg(long = "slurm-weight-fairshare", default_value_t = 10_000)]
    pub weight_fairshare: u32,
    /// PriorityWeightAge.
    #[arg(long = "slurm-weight-age", default_value_t = 1_000)]
    pub weight_age: u32,
    /// PriorityWeightJobSize.
    #[arg(long = "slurm-weight-job-size", default_value_t = 1_000)]
    pub weight_job_size: u32,
    /// PriorityWeightQOS (QOS factors: scavenger 0, normal 0.5, debug 1).
    #[arg(long = "slurm-weight-qos", default_value_t = 20_000)]
    pub weight_qos: u32,
}

impl SlurmArgs {
    /// The engine's settings, with durations read by `duration` (which names the flag).
    pub fn config<E>(
        &self,
        duration: impl Fn(&str, &'static str) -> Result<i64, E>,
    ) -> Result<scheduler::SlurmConfig, E> {
        Ok(scheduler::SlurmConfig {
            weight_fairshare: self.weight_fairshare,
            weight_age: self.weight_age,
            weight_job_size: self.weight_job_size,
            weight_qos: self.weight_qos,
            max_age: duration(&self.max_age, "slurm-max-age")?,
            max_wall: duration(&self.max_wall, "slurm-max-wall")?,
            decay_half_life: duration(&self.half_life, "slurm-half-life")?,
            calc_period: duration(&self.calc_period, "slurm-calc-period")?,
        })
    }
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
        /// Debug workloads submitted a day (1,300 gives a month of about 31,000).
        #[arg(long, default_value_t = 1000,
            value_parser = clap::value_parser!(u32).range(0..=100_000))]
        debug_per_day: u32,
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
