//! 30 simulated days of the reference-like scenario (1,024 GPUs, 40,000+ workloads) under each
//! policy: the target is under 1 s per policy, release build, one core, under 500 MB.
//!
//! `cargo bench -p scheduler --bench simulate [-- --runs N --seed S --days D --policy P
//! --member M]` prints the median wall time per policy (`fair-share`, `priority`, `slurm`; all
//! unless one is named), the summary table and the process's peak memory. `--member` runs one of
//! the scenario family's members (`debug-heavy`, …, `philly`) instead of the preset month.
//! `--debug-per-day N` sets the preset month's debug workloads a day (1,000 by default: some
//! 24,000 a month count as debug work; the independent month had about 31,000, which
//! 1,300 a day gives).

use std::time::Instant;

use scheduler::sim::family::members;
use scheduler::sim::scenario::{generate, ScenarioConfig};
use scheduler::sim::{self, summary_table, SimConfig, SimInput};
use scheduler::Policy;

/// The whole number after flag `name`, or `default` when the flag is not given; anything else
/// after it ends the bench with a message (a typo must not measure the default instead).
fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    let Some(i) = args.iter().position(|a| a == name) else {
        return default;
    };
    match args.get(i + 1).map(|v| v.parse()) {
        Some(Ok(value)) => value,
        _ => {
            eprintln!("{name} takes a whole number");
            std::process::exit(2);
        }
    }
}

/// The Philly trace's text for `--member philly` (from `../shared`, as the matrix example reads it).
fn philly_text(member: &str) -> Option<String> {
    (member == "philly").then(|| {
        [
            "../shared/traces/philly/philly_by_vc.csv",
            "../../shared/traces/philly/philly_by_vc.csv",
        ]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .expect("the Philly trace under ../shared/traces/philly")
    })
}

fn main() {
    let runs = arg("--runs", 5).max(1) as usize;
    let seed = arg("--seed", 1);
    let days = arg("--days", 30) as u32;
    let member = std::env::args()
        .position(|a| a == "--member")
        .and_then(|i| std::env::args().nth(i + 1));
    if member.is_some() && std::env::args().any(|a| a == "--debug-per-day") {
        eprintln!("--debug-per-day sets the preset month's debug work, not a member's");
        std::process::exit(2);
    }
    let started = Instant::now();
    let s = match member.as_deref() {
        None => {
            let preset = ScenarioConfig::reference(seed, days);
            let debug_per_day = arg("--debug-per-day", preset.debug_per_day as u64) as f64;
            generate(&ScenarioConfig {
                debug_per_day,
                ..preset
            })
        }
        Some(name) => match members(seed, days, philly_text(name).as_deref())
            .expect("valid family")
            .into_iter()
            .find(|m| m.name == name)
        {
            Some(m) => m.scenario,
            None => {
                eprintln!("--member names one of the family's members, not \"{name}\"");
                std::process::exit(2);
            }
        },
    };
    let generated = started.elapsed().as_secs_f64();
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).expect("valid");
    println!(
        "scenario: seed {seed}, {days} days, {} workloads, {} GPUs (generated in {generated:.3} s)",
        input.trace.len(),
        input.cluster.total_gpus()
    );
    let mut reports = Vec::new();
    let only = std::env::args()
        .position(|a| a == "--policy")
        .and_then(|i| std::env::args().nth(i + 1));
    if let Some(p) = only
        .as_deref()
        .filter(|p| !["fair-share", "priority", "slurm"].contains(p))
    {
        eprintln!("--policy is fair-share, priority or slurm, not \"{p}\"");
        std::process::exit(2);
    }
    for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
        let name = policy.name();
        if only.as_deref().is_some_and(|p| p != name) {
            continue;
        }
        let mut config = SimConfig {
            policy,
            ..SimConfig::default()
        };
        if let Some(period) = std::env::args()
            .position(|a| a == "--slurm-calc-period")
            .and_then(|i| std::env::args().nth(i + 1))
            .and_then(|v| v.parse().ok())
        {
            config.slurm.calc_period = period;
        }
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs {
            let t = Instant::now();
            let out = sim::run(&input, &config);
            times.push(t.elapsed().as_secs_f64());
            last = Some(out);
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let mut report = last.expect("at least one run").report;
        report.wall_s = median;
        println!(
            "simulate/{policy:?}: median {median:.3} s over {runs} runs (min {:.3}, max {:.3})",
            times[0],
            times[times.len() - 1]
        );
        reports.push(report);
    }
    println!("{}", summary_table(&reports.iter().collect::<Vec<_>>()));
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines().filter(|l| l.starts_with("VmHWM")) {
            println!("peak memory: {}", line.trim_start_matches("VmHWM:").trim());
        }
    }
}
