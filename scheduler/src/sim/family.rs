//! The scenario family: seeded generators and the Philly trace, each run under both policies,
//! so that a change to the engine is judged on workloads it was not tuned for. Every member
//! gives the priority baseline its best case (debug work says high).

use std::fmt::Write as _;

use super::input::InputError;
use super::report::{duration, percent, Report};
use super::scenario::{generate, Scenario, ScenarioConfig};
use super::{philly, run, FileError, SimConfig, SimInput};
use crate::engine::Policy;

/// One scenario of the family.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: &'static str,
    /// What it has, in a line.
    pub about: String,
    pub scenario: Scenario,
}

/// The generated members for `seed` and `days`, then the Philly trace's first `days` when its
/// text is given.
pub fn members(seed: u64, days: u32, philly_csv: Option<&str>) -> Result<Vec<Member>, InputError> {
    let reference = |seed| ScenarioConfig {
        gang_scale: 2.0,
        allocated_load: 1.0,
        ..ScenarioConfig::reference(seed, days)
    };
    let configs: Vec<(&'static str, &str, ScenarioConfig)> = vec![
        (
            "reference",
            "1,024 GPUs, 15 teams under 3 programs, one at 35%, gangs up to twice a team's share",
            reference(seed),
        ),
        (
            "small-88",
            "88 GPUs (11 hosts), about 3x offered load",
            ScenarioConfig {
                hosts: vec![8; 11],
                allocated_load: 2.4,
                free_load: 0.45,
                ..reference(seed + 1)
            },
        ),
        (
            "large-4096",
            "4,096 GPUs (512 hosts), the reference's mix",
            ScenarioConfig {
                hosts: vec![8; 512],
                ..reference(seed + 2)
            },
        ),
        (
            "gang-heavy",
            "three times the multi-host training",
            ScenarioConfig {
                large_weight: 3.0,
                ..reference(seed + 3)
            },
        ),
        (
            "debug-heavy",
            "four times the debug workloads (4,000 a day)",
            ScenarioConfig {
                debug_per_day: 4000.0,
                ..reference(seed + 4)
            },
        ),
        (
            "interactive",
            "interactive sessions: 8 h protected, 1-4 days long, not resumable",
            ScenarioConfig {
                squat_load: 0.15,
                allocated_load: 0.9,
                ..reference(seed + 5)
            },
        ),
    ];
    let mut out: Vec<Member> = configs
        .into_iter()
        .map(|(name, about, config)| Member {
            name,
            about: about.to_string(),
            scenario: generate(&config),
        })
        .collect();
    if let Some(text) = philly_csv {
        let c = philly::convert(text, days)?;
        out.push(Member {
            name: "philly",
            about: format!(
                "the Philly trace's first {days} days: {} jobs, {} virtual clusters, {} GPUs",
                c.jobs, c.teams, c.gpus
            ),
            scenario: c.scenario,
        });
    }
    Ok(out)
}

/// A member's reports under the three policies.
#[derive(Clone, Debug)]
pub struct MatrixRow {
    pub name: &'static str,
    pub fair_share: Report,
    pub priority: Report,
    pub slurm: Report,
}

impl MatrixRow {
    pub fn reports(&self) -> [&Report; 3] {
        [&self.fair_share, &self.priority, &self.slurm]
    }
}

/// Runs one member under the three policies. Each run goes through `timed`, which calls it and may
/// fill in the report's `wall_s` (the simulator has no clock).
pub fn run_member(
    member: &Member,
    config: &SimConfig,
    mut timed: impl FnMut(&dyn Fn() -> Report) -> Report,
) -> Result<MatrixRow, FileError> {
    let s = &member.scenario;
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv)?;
    let mut report = |policy| timed(&|| run(&input, &SimConfig { policy, ..*config }).report);
    Ok(MatrixRow {
        name: member.name,
        fair_share: report(Policy::FairShare),
        priority: report(Policy::Priority),
        slurm: report(Policy::Slurm),
    })
}

/// Every measure of every member, both policies, as a Markdown table.
pub fn matrix_table(rows: &[MatrixRow]) -> String {
    let mut out = String::from(
        "| scenario | policy | GPUs | workloads | demand / capacity | occupancy (limit / rigid; idle while work waited) | \
         delivered/owed overall / worst / >=95% | hourly | debug wait p50 / p90 / p99 | \
         large wait p50 / p90 | large / single wait | all wait p90 | requeue wait p90 | \
         preemptions | lost GPU-h (all; to preemption: allocated / free) | zero-length runs | wall |\n",
    );
    out.push_str(&"|---".repeat(17));
    out.push_str("|\n");
    for row in rows {
        for r in row.reports() {
            let d = &r.delivered_over_owed;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.2}x | {} ({} / {}; {}) | {} / {} / {} of {} | {} | {} / {} / {} | \
                 {} / {} | {} | {} | {} | {} | {:.0} ({:.2}%; {}) | {} | {:.2} s |",
                row.name,
                r.policy,
                r.gpus,
                r.workloads.submitted,
                r.demand_over_capacity,
                percent(Some(r.occupancy)),
                percent(Some(r.occupancy_limit)),
                percent(Some(r.occupancy_rigid)),
                percent(Some(r.idle_while_waiting)),
                percent(d.overall),
                percent(d.min),
                d.teams_at_95pct,
                d.teams,
                percent(d.hourly),
                duration(r.wait_s.debug.p50),
                duration(r.wait_s.debug.p90),
                duration(r.wait_s.debug.p99),
                duration(r.wait_s.large.p50),
                duration(r.wait_s.large.p90),
                r.large_over_single_wait
                    .map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
                duration(r.wait_s.all.p90),
                duration(r.requeue_wait_s.p90),
                r.preemptions,
                r.lost_gpu_h,
                100.0 * r.lost_fraction,
                r.lost_to_preemption.percentages(),
                r.zero_length_runs,
                r.wall_s,
            );
        }
    }
    out
}
