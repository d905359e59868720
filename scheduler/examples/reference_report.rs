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
        if std::env::var("ONLY").is_ok_and(|o| (o == "fair") != (policy == Policy::FairShare)) {
            continue;
        }
        let config = SimConfig {
            policy,
            ..SimConfig::default()
        };
        let out = sim::run(&input, &config);
        if std::env::var("ANALYZE").is_ok() {
            let mut first: std::collections::HashMap<u32, (i64, bool)> = Default::default();
            for seg in &out.segments {
                first.entry(seg.row).or_insert((seg.start, seg.protected_until.is_some()));
            }
            let mut classes: std::collections::BTreeMap<&str, Vec<i64>> = Default::default();
            for (i, r) in input.trace.iter().enumerate() {
                if !(r.min_runtime > 0 && r.min_runtime <= 900 && r.gpus <= 8) { continue; }
                let (class, wait) = match first.get(&(i as u32)) {
                    Some(&(start, p)) => (if p { "protected" } else { "preemptible" }, start - r.submit),
                    None => ("never", -1),
                };
                classes.entry(class).or_default().push(wait);
            }
            let mut prot: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
            for seg in &out.segments {
                let e = prot.entry(input.trace[seg.row as usize].project.clone()).or_default();
                let gs = seg.gpu_seconds();
                if seg.protected_until.is_some() { e.0 += gs } else if seg.allocated { e.1 += gs }
            }
            let h = 30.0 * 86400.0;
            for (p, (a, b)) in &prot { eprintln!("{policy:?} {p}: protected avg {:.0} GPUs, allocated-unprotected avg {:.0}", a / h, b / h); }
            for (c, mut w) in classes { w.sort(); let n = w.len(); eprintln!("{policy:?} debug {c}: n={n} p50={} p90={} zero={}", w[n/2], w[n*9/10], w.iter().filter(|&&x| x == 0).count()); }
        }
        let mut report = out.report;
        report.wall_s = 0.0;
        println!("{}", report.to_json());
        reports.push(report);
    }
    eprintln!("{}", summary_table(&reports.iter().collect::<Vec<_>>()));
}
