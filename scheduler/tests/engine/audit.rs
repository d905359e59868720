//! DESIGN §6: every figure of the report is recomputable from the trace, the cluster file and the
//! timeline. This recomputes them from those texts alone and compares with the report.

use std::collections::BTreeMap;

use scheduler::sim::scenario::{generate, ScenarioConfig};
use scheduler::sim::{self, parse_cluster, parse_trace, parse_tree, SimConfig, SimInput};
use scheduler::Policy;

struct Row {
    workload: String,
    project: String,
    node: String,
    gpus: f64,
    start: i64,
    end: i64,
    allocated: bool,
    end_kind: String,
}

fn parse_timeline(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(sim::TIMELINE_HEADER));
    lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            assert_eq!(c.len(), 9, "{l}");
            Row {
                workload: c[0].into(),
                project: c[1].into(),
                node: c[2].into(),
                gpus: c[3].split(';').count() as f64,
                start: c[4].parse().unwrap(),
                end: c[5].parse().unwrap(),
                allocated: c[6] == "true",
                end_kind: c[8].into(),
            }
        })
        .collect()
}

fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 2e-6 * b.abs().max(1.0),
        "{what}: recomputed {a}, reported {b}"
    );
}

/// Adds `gpus` over `[a, b)` to hourly GPU-second buckets clipped to `[0, horizon)`.
fn spread(hours: &mut [f64], a: i64, b: i64, gpus: f64, horizon: i64) {
    let (mut t, end) = (a.max(0), b.min(horizon));
    while t < end {
        let h = t / 3_600;
        let edge = ((h + 1) * 3_600).min(end);
        hours[h as usize] += gpus * (edge - t) as f64;
        t = edge;
    }
}

fn audit(policy: Policy) {
    let mut config = ScenarioConfig::reference(21, 2);
    config.hosts = vec![8; 16];
    config.outages_per_day = 24.0;
    let s = generate(&config);
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
    let out = sim::run(
        &input,
        &SimConfig {
            policy,
            ..SimConfig::default()
        },
    );
    let report: serde_json::Value = serde_json::from_str(&out.report.to_json()).unwrap();
    let timeline = sim::timeline_csv(&input, &out.segments);

    // From here on: only the three texts and the timeline.
    let tree = parse_tree(&s.tree_toml).unwrap();
    let cluster = parse_cluster(&s.cluster_toml).unwrap();
    let trace = parse_trace(&s.trace_csv, &tree).unwrap();
    let rows = parse_timeline(&timeline);
    let horizon = trace.iter().map(|r| r.submit).max().unwrap();
    assert_eq!(report["horizon_s"], horizon);
    let hours = (horizon as usize).div_ceil(3_600);
    let node_gpus: BTreeMap<&str, f64> = cluster
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), f64::from(n.gpus)))
        .collect();
    let mut outages: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
    let mut capacity = vec![0.0; hours];
    for n in &cluster.nodes {
        spread(&mut capacity, 0, horizon, f64::from(n.gpus), horizon);
    }
    for o in &cluster.outages {
        let name = cluster.nodes[o.node.0 as usize].name.as_str();
        spread(&mut capacity, o.from, o.to, -node_gpus[name], horizon);
        outages.entry(name).or_default().push((o.from, o.to));
    }

    // Occupancy and the unallocated fraction.
    let (mut busy, mut free) = (0.0, 0.0);
    let mut charged: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut unallocated: BTreeMap<&str, f64> = BTreeMap::new();
    let mut first_start: BTreeMap<&str, i64> = BTreeMap::new();
    let mut ended: BTreeMap<&str, (i64, &str)> = BTreeMap::new();
    for r in &rows {
        let away: i64 = outages.get(r.node.as_str()).map_or(0, |v| {
            v.iter()
                .map(|&(a, b)| (b.min(r.end) - a.max(r.start)).max(0))
                .sum()
        });
        let healthy = r.gpus * (r.end - r.start - away) as f64;
        busy += healthy;
        if r.allocated {
            let h = charged
                .entry(r.project.as_str())
                .or_insert_with(|| vec![0.0; hours]);
            spread(h, r.start, r.end, r.gpus, horizon);
        } else {
            free += healthy;
            *unallocated.entry(r.project.as_str()).or_default() +=
                r.gpus * (r.end - r.start) as f64;
        }
        let first = first_start.entry(r.workload.as_str()).or_insert(r.start);
        *first = (*first).min(r.start);
        if r.end_kind == "completed" || r.end_kind == "killed" {
            ended.insert(r.workload.as_str(), (r.end, r.end_kind.as_str()));
        }
    }
    let healthy: f64 = capacity.iter().sum();
    close(
        busy / healthy,
        report["occupancy"].as_f64().unwrap(),
        "occupancy",
    );
    close(
        free / busy,
        report["unallocated_fraction"].as_f64().unwrap(),
        "unallocated",
    );

    // Workload counts and waits.
    let completed = ended.values().filter(|e| e.1 == "completed").count();
    let killed = ended.values().filter(|e| e.1 == "killed").count();
    assert_eq!(report["workloads"]["submitted"], trace.len());
    assert_eq!(report["workloads"]["completed"], completed);
    assert_eq!(report["workloads"]["killed"], killed);
    assert_eq!(
        report["workloads"]["unfinished"],
        trace.len() - completed - killed
    );
    let node_size = cluster.node_size();
    let (mut all, mut debug, mut large) = (Vec::new(), Vec::new(), Vec::new());
    let mut demand: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in &trace {
        let wait = first_start.get(t.id.as_str()).copied().unwrap_or(horizon) - t.submit;
        all.push(wait);
        let min_runtime = t.min_runtime.min(8 * 3_600);
        if min_runtime > 0 && min_runtime <= 900 && t.gpus <= 8 {
            debug.push(wait);
        }
        if t.gpus > node_size {
            large.push(wait);
        }
        if min_runtime > 0 {
            let until = ended.get(t.id.as_str()).map_or(horizon, |e| e.0);
            let h = demand
                .entry(t.project.as_str())
                .or_insert_with(|| vec![0.0; hours]);
            spread(h, t.submit, until, f64::from(t.gpus), horizon);
        }
    }
    for (name, mut waits) in [("all", all), ("debug", debug), ("large", large)] {
        waits.sort_unstable();
        let w = &report["wait_s"][name];
        assert_eq!(w["count"], waits.len(), "{name}");
        for (p, key) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")] {
            assert_eq!(w[key].as_i64(), percentile(&waits, p), "{name} {key}");
        }
    }

    // Owed, delivered and charged per node, summed up the tree; the team headline.
    let (mut owed_sum, mut met, mut hourly_met, mut worst, mut at_95) = (0.0, 0.0, 0.0, 1.0f64, 0);
    let zero = vec![0.0; hours];
    for (i, id) in tree.ids().enumerate() {
        let path = tree.path(id);
        let under = |p: &str| path.is_empty() || p == path || p.starts_with(&format!("{path}/"));
        let sum = |m: &BTreeMap<&str, Vec<f64>>| -> Vec<f64> {
            let mut v = zero.clone();
            for (_, h) in m.iter().filter(|(p, _)| under(p)) {
                v.iter_mut().zip(h).for_each(|(a, b)| *a += b);
            }
            v
        };
        let (c, d) = (sum(&charged), sum(&demand));
        let f = tree.latest().fraction(id);
        let owed_h: Vec<f64> = (0..hours).map(|h| (f * capacity[h]).min(d[h])).collect();
        let owed: f64 = owed_h.iter().sum();
        let delivered: f64 = c.iter().sum();
        let node = &report["nodes"][i];
        assert_eq!(node["path"], path);
        close(owed / 3_600.0, node["owed_gpu_h"].as_f64().unwrap(), "owed");
        close(
            delivered / 3_600.0,
            node["delivered_gpu_h"].as_f64().unwrap(),
            "delivered",
        );
        close(
            delivered / 3_600.0,
            node["charged_gpu_h"].as_f64().unwrap(),
            "ledger charge",
        );
        let free: f64 = unallocated
            .iter()
            .filter(|(p, _)| under(p))
            .map(|(_, v)| v)
            .sum();
        close(
            free / 3_600.0,
            node["unallocated_gpu_h"].as_f64().unwrap(),
            "unallocated",
        );
        if tree.is_leaf(id) && owed > 0.0 {
            owed_sum += owed;
            met += delivered.min(owed);
            hourly_met += (0..hours).map(|h| c[h].min(owed_h[h])).sum::<f64>();
            worst = worst.min(delivered / owed);
            at_95 += usize::from(delivered / owed >= 0.95);
        }
    }
    let dow = &report["delivered_over_owed"];
    close(met / owed_sum, dow["overall"].as_f64().unwrap(), "overall");
    close(
        hourly_met / owed_sum,
        dow["hourly"].as_f64().unwrap(),
        "hourly",
    );
    close(worst.min(1.0), dow["min"].as_f64().unwrap(), "min");
    assert_eq!(dow["teams_at_95pct"], at_95);
    assert!(rows
        .iter()
        .any(|r| r.end_kind == "preempted" || r.end_kind == "drained"));
}

#[test]
fn the_trace_cluster_and_timeline_recompute_the_fair_share_report() {
    audit(Policy::FairShare);
}

#[test]
fn the_trace_cluster_and_timeline_recompute_the_baseline_report() {
    audit(Policy::Priority);
}

#[test]
fn the_trace_cluster_and_timeline_recompute_the_slurm_report() {
    audit(Policy::Slurm);
}
