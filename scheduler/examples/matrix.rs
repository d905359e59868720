//! Runs the scenario family under both policies and prints the Markdown table, for work on the
//! engine: `cargo run --release -p scheduler --example matrix -- [SEED] [DAYS] [ONLY]`. The
//! product's command is `hourglass simulate matrix --out-dir DIR`.

use std::time::Instant;

use scheduler::sim::family::{matrix_table, members, run_member};
use scheduler::sim::SimConfig;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seed = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
    let days = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    let only = args.get(2).cloned();
    let philly = std::fs::read_to_string("../shared/traces/philly/philly_by_vc.csv")
        .or_else(|_| std::fs::read_to_string("../../shared/traces/philly/philly_by_vc.csv"))
        .ok();
    let mut rows = Vec::new();
    for m in members(seed, days, philly.as_deref()).expect("valid family") {
        if only.as_deref().is_some_and(|o| !m.name.contains(o)) {
            continue;
        }
        if std::env::var_os("MATRIX_TEAMS").is_some() {
            team_waits(&m);
        }
        let row = run_member(&m, &SimConfig::default(), |run| {
            let t = Instant::now();
            let mut report = run();
            report.wall_s = t.elapsed().as_secs_f64();
            report
        })
        .expect("valid member");
        eprintln!(
            "{}: {:.1} s + {:.1} s",
            m.name, row.fair_share.wall_s, row.priority.wall_s
        );
        rows.push(row);
    }
    print!("{}", matrix_table(&rows));
}

/// Per team, for work on the engine: mean waits of multi-host and of single-host non-debug
/// allocated work under fair share (`MATRIX_TEAMS=1`).
fn team_waits(m: &scheduler::sim::family::Member) {
    use scheduler::sim::{self, SimInput};
    let s = &m.scenario;
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
    let out = sim::run(&input, &SimConfig::default());
    let horizon = out.report.horizon_s;
    let mut first = vec![None::<i64>; input.trace.len()];
    for seg in &out.segments {
        let f = &mut first[seg.row as usize];
        *f = Some(f.map_or(seg.start, |x: i64| x.min(seg.start)));
    }
    let node = input.cluster.node_size();
    if std::env::var_os("MATRIX_IDLE").is_some() {
        let total = input.cluster.total_gpus() as i64;
        for h in (0..horizon / 3600).step_by(12) {
            let t = h * 3600 + 1800;
            let busy: i64 = out
                .segments
                .iter()
                .filter(|s| s.start <= t && t < s.end)
                .map(|s| i64::from(s.gpus.count()))
                .sum();
            let waiting: Vec<u32> = input
                .trace
                .iter()
                .enumerate()
                .filter(|(i, r)| r.submit <= t && first[*i].is_none_or(|f| f > t))
                .map(|(_, r)| r.gpus)
                .collect();
            let small = waiting.iter().filter(|&&g| g <= 8).count();
            eprintln!(
                "t {h:4} h busy {busy}/{total} waiting {} (<=8 GPUs: {small})",
                waiting.len()
            );
        }
    }
    let mut teams: std::collections::BTreeMap<String, [(f64, u32); 3]> = Default::default();
    for (i, r) in input.trace.iter().enumerate() {
        let wait = (first[i].unwrap_or(horizon) - r.submit) as f64;
        let e = teams
            .entry(input.tree.path(r.leaf).to_string())
            .or_default();
        let k = if r.gpus > node {
            0
        } else if r.min_runtime > 15 * 60 {
            1
        } else if r.min_runtime > 0 {
            2
        } else {
            continue;
        };
        e[k].0 += wait;
        e[k].1 += 1;
    }
    let mut lost = [0.0f64; 2];
    for seg in &out.segments {
        if seg.end_kind == sim::SegmentEnd::Killed {
            lost[usize::from(seg.allocated)] += seg.gpu_seconds() / 3600.0;
        }
    }
    eprintln!(
        "lost GPU-h: free {:.0}, allocated {:.0}; by reason {:?}; preemptions {:?}",
        lost[0], lost[1], out.report.lost_gpu_h_by_reason, out.report.preemptions_by_reason
    );
    for (team, v) in teams {
        let mean = |x: (f64, u32)| {
            if x.1 > 0 {
                x.0 / x.1 as f64 / 3600.0
            } else {
                0.0
            }
        };
        eprintln!(
            "{team:24} large {:6.2} h (n {:4})  single {:6.2} h (n {:5})  debug {:6.3} h",
            mean(v[0]),
            v[0].1,
            mean(v[1]),
            v[1].1,
            mean(v[2])
        );
    }
}
