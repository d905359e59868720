//! A lab run's result for the page: the two policies' reports as a side-by-side table, their wait
//! distributions and what each team was owed and delivered.

use app::lab::{LabResult, MeasureRow, TeamRow, WaitRow};
use scheduler::sim::{preemption_reasons, Report, SimInput, WaitStats};

/// `reports` is fair share, then the priority baseline.
pub fn summarise(input: &SimInput, reports: [&Report; 2]) -> LabResult {
    let mut measures = Vec::new();
    let mut row = |label: &str, detail: bool, f: &dyn Fn(&Report) -> String| {
        measures.push(MeasureRow {
            label: label.to_string(),
            detail,
            fair_share: f(reports[0]),
            priority: f(reports[1]),
        });
    };
    row("Delivered / owed, overall", false, &|r| {
        percent(r.delivered_over_owed.overall)
    });
    row("Worst team", true, &|r| percent(r.delivered_over_owed.min));
    row("Teams at ≥ 95%", true, &|r| {
        format!(
            "{} of {}",
            r.delivered_over_owed.teams_at_95pct, r.delivered_over_owed.teams
        )
    });
    row("Hourly tracking", true, &|r| {
        percent(r.delivered_over_owed.hourly)
    });
    row("Occupancy", false, &|r| percent(Some(r.occupancy)));
    row("Unallocated fraction", false, &|r| {
        percent(Some(r.unallocated_fraction))
    });
    row("Debug wait p90", false, &|r| wait(r.wait_s.debug.p90));
    row("Large wait p90", false, &|r| wait(r.wait_s.large.p90));
    row("All waits p50 / p90 / p99", false, &|r| {
        triple(&r.wait_s.all)
    });
    row("Requeue wait p50 / p90 / p99", false, &|r| {
        triple(&r.requeue_wait_s)
    });
    row("Preemptions", false, &|r| r.preemptions.to_string());
    for reason in preemption_reasons(&reports) {
        row(reason, true, &|r| r.preemptions_for(reason).to_string());
    }
    row("Workloads completed", false, &|r| {
        format!("{} of {}", r.workloads.completed, r.workloads.submitted)
    });
    row("Killed (work lost)", true, &|r| {
        r.workloads.killed.to_string()
    });
    row("Unfinished at the end", true, &|r| {
        r.workloads.unfinished.to_string()
    });
    row("Lost GPU-hours", false, &|r| format!("{:.0}", r.lost_gpu_h));
    row("Demand / capacity", false, &|r| {
        format!("{:.2}×", r.demand_over_capacity)
    });
    row("Decision passes", false, &|r| r.decisions.to_string());
    row("Wall time", false, &|r| format!("{:.2} s", r.wall_s));

    let mut waits = Vec::new();
    for (policy, r) in ["fair-share", "priority"].into_iter().zip(reports) {
        for (class, stats) in [
            ("all", &r.wait_s.all),
            ("debug", &r.wait_s.debug),
            ("large", &r.wait_s.large),
            ("requeue", &r.requeue_wait_s),
        ] {
            waits.push(WaitRow {
                class: class.into(),
                policy: policy.into(),
                count: stats.count,
                p50_s: stats.p50,
                p90_s: stats.p90,
                p99_s: stats.p99,
            });
        }
    }

    let leaves: Vec<&str> = input.tree.leaves().map(|id| input.tree.path(id)).collect();
    let teams = reports[0]
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| leaves.contains(&n.path.as_str()))
        .map(|(i, n)| {
            let other = &reports[1].nodes[i];
            TeamRow {
                path: n.path.clone(),
                fraction: n.fraction,
                owed_gpu_h: [n.owed_gpu_h, other.owed_gpu_h],
                delivered_gpu_h: [n.delivered_gpu_h, other.delivered_gpu_h],
                delivered_over_owed: [n.delivered_over_owed, other.delivered_over_owed],
            }
        })
        .collect();

    LabResult {
        gpus: reports[0].gpus,
        hosts: input.cluster.nodes.len() as u32,
        horizon_s: reports[0].horizon_s,
        workloads: reports[0].workloads.submitted,
        measures,
        waits,
        teams,
    }
}

fn percent(x: Option<f64>) -> String {
    x.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "—".into())
}

fn wait(seconds: Option<i64>) -> String {
    seconds
        .map(app::workloads::sentences::duration)
        .unwrap_or_else(|| "—".into())
}

fn triple(s: &WaitStats) -> String {
    format!("{} / {} / {}", wait(s.p50), wait(s.p90), wait(s.p99))
}
