//! Writes the JSON reports of both policies on the reference scenario (`wall_s` zeroed), one per
//! line, and the summary table on stderr, so a change to the engine can be checked for identical
//! decisions: `cargo run --release -p scheduler --example reference_report -- [SEED] [DAYS] >
//! before.json`, change, rerun, `cmp`. Variants of the preset for experiments: `squat=0.3`,
//! `load=1.2`, `free=0.2`, `debug=1400` set `squat_load`, `allocated_load`, `free_load` and
//! `debug_per_day` of [`ScenarioConfig`].

use scheduler::sim::scenario::{generate, ScenarioConfig};
use scheduler::sim::{self, summary_table, SimConfig, SimInput};
use scheduler::Policy;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seed = args.first().copied().unwrap_or(1);
    let days = args.get(1).copied().unwrap_or(30) as u32;
    let mut config = ScenarioConfig::reference(seed, days);
    // Optional overrides, `name=value`, to try variants of the preset.
    for arg in std::env::args().skip(1) {
        let Some((name, value)) = arg.split_once('=') else {
            continue;
        };
        let value: f64 = value.parse().expect("a number");
        match name {
            "squat" => config.squat_load = value,
            "load" => config.allocated_load = value,
            "free" => config.free_load = value,
            "debug" => config.debug_per_day = value,
            _ => panic!("unknown override {name}"),
        }
    }
    let s = generate(&config);
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).expect("valid");
    let mut reports = Vec::new();
    for policy in [Policy::FairShare, Policy::Priority] {
        let config = SimConfig {
            policy,
            ..SimConfig::default()
        };
        let mut report = sim::run(&input, &config).report;
        report.wall_s = 0.0;
        println!("{}", report.to_json());
        reports.push(report);
    }
    eprintln!("{}", summary_table(&reports.iter().collect::<Vec<_>>()));
}
