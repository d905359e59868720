//! A lab run's result for the page: the three policies' reports as a side-by-side table, their
//! wait distributions and what each team was owed and delivered.

use app::lab::{LabResult, MeasureRow, TeamRow, WaitRow, POLICIES};
use scheduler::sim::{preemption_reasons, Report, SimInput, WaitStats};

/// `reports` is fair share, the priority baseline, then the SLURM peer.
pub fn summarise(input: &SimInput, reports: [&Report; 3]) -> LabResult {
    let mut measures = Vec::new();
    let mut row = |label: &str, detail: bool, f: &dyn Fn(&Report) -> String| {
        measures.push(MeasureRow {
            label: label.to_string(),
            detail,
            fair_share: f(reports[0]),
            priority: f(reports[1]),
            slurm: f(reports[2]),
            verdict: None,
            verdict_slurm: None,
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
    row("Lost to preemption: allocated / free", true, &|r| {
        r.lost_to_preemption.percentages()
    });
    row("Demand / capacity", false, &|r| {
        format!("{:.2}×", r.demand_over_capacity)
    });
    row("Decision passes", false, &|r| r.decisions.to_string());
    row("Wall time", false, &|r| format!("{:.2} s", r.wall_s));
    for m in &mut measures {
        m.verdict = verdict(&m.label, reports[0], reports[1], "The priority baseline");
        m.verdict_slurm = verdict(&m.label, reports[0], reports[2], "The SLURM peer");
    }

    let mut waits = Vec::new();
    for (policy, r) in POLICIES.map(|p| p.0).into_iter().zip(reports) {
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
            let each = reports.map(|r| &r.nodes[i]);
            TeamRow {
                path: n.path.clone(),
                fraction: n.fraction,
                owed_gpu_h: each.map(|n| n.owed_gpu_h),
                delivered_gpu_h: each.map(|n| n.delivered_gpu_h),
                delivered_over_owed: each.map(|n| n.delivered_over_owed),
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

/// The plain-language verdict for one summary row: whether fair share or `other` (named, as a
/// sentence starts) is better on it and by how much.
fn verdict(label: &str, fair: &Report, baseline: &Report, other: &str) -> Option<String> {
    let share = |r: &Report| r.delivered_over_owed.overall;
    Some(match label {
        "Delivered / owed, overall" => points(share(fair), share(baseline), "what teams were owed", other)?,
        "Worst team" => points(
            fair.delivered_over_owed.min,
            baseline.delivered_over_owed.min,
            "what the worst-served team was owed",
            other,
        )?,
        "Hourly tracking" => points(
            fair.delivered_over_owed.hourly,
            baseline.delivered_over_owed.hourly,
            "owed time delivered in the hour it was owed",
            other,
        )?,
        "Occupancy" => points(
            Some(fair.occupancy),
            Some(baseline.occupancy),
            "GPU time kept busy",
            other,
        )?,
        "Debug wait p90" => waits(fair.wait_s.debug.p90, baseline.wait_s.debug.p90, other)?,
        "Large wait p90" => waits(fair.wait_s.large.p90, baseline.wait_s.large.p90, other)?,
        "Lost GPU-hours" => {
            let (f, b) = (fair.lost_gpu_h, baseline.lost_gpu_h);
            if (f - b).abs() < 0.5 {
                "The same work lost under both.".to_string()
            } else if f < b {
                format!("Fair share loses {:.0} GPU-hours less of work that cannot resume.", b - f)
            } else {
                format!("{other} loses {:.0} GPU-hours less of work that cannot resume.", f - b)
            }
        }
        "Preemptions" => {
            let (f, b) = (fair.preemptions as f64, baseline.preemptions as f64);
            if f == b {
                "As many under both.".to_string()
            } else if f > b {
                format!(
                    "Fair share preempts {} as often: the price of handing GPUs back to under-served teams and to short work (resumable work returns to the queue).",
                    times(f, b)
                )
            } else {
                format!("{other} preempts {} as often.", times(b, f))
            }
        }
        "Demand / capacity" if other == "The priority baseline" => format!(
            "The same input for all: its workloads ask for {:.2}× the GPU time the healthy GPUs offer over the period.",
            fair.demand_over_capacity
        ),
        _ => return None,
    })
}

/// "Fair share is better by 12.3 points …" for a fraction where higher is better.
fn points(fair: Option<f64>, baseline: Option<f64>, what: &str, other: &str) -> Option<String> {
    let (f, b) = (fair?, baseline?);
    let d = (f - b) * 100.0;
    Some(if d.abs() < 0.5 {
        format!("About the same under both (within half a point of {what}).")
    } else if d > 0.0 {
        format!("Fair share is better by {d:.1} points of {what}.")
    } else {
        format!("{other} is better by {:.1} points of {what}.", -d)
    })
}

/// Which policy's wait is shorter, and how much, where shorter is better.
fn waits(fair: Option<i64>, baseline: Option<i64>, other: &str) -> Option<String> {
    let (f, b) = (fair?, baseline?);
    let duration = app::workloads::sentences::duration;
    Some(if f.max(b) < 60 {
        "Both start these within a minute.".to_string()
    } else if f < b {
        format!(
            "Fair share starts them {} sooner ({} shorter).",
            duration(b - f),
            times(b as f64, f as f64)
        )
    } else if b < f {
        format!(
            "{other} starts them {} sooner ({} shorter).",
            duration(f - b),
            times(f as f64, b as f64)
        )
    } else {
        "The same under both.".to_string()
    })
}

/// `3.2×` for `a / b` (`b` at least 1).
fn times(a: f64, b: f64) -> String {
    format!("{:.1}×", a / b.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = "The priority baseline";

    #[test]
    fn a_verdict_names_the_better_policy_and_by_how_much() {
        assert_eq!(
            points(Some(0.95), Some(0.80), "what teams were owed", B).unwrap(),
            "Fair share is better by 15.0 points of what teams were owed."
        );
        assert_eq!(
            points(Some(0.70), Some(0.72), "x", "The SLURM peer").unwrap(),
            "The SLURM peer is better by 2.0 points of x."
        );
        assert!(points(Some(0.9), Some(0.902), "x", B)
            .unwrap()
            .starts_with("About the same"));
        assert_eq!(points(None, Some(0.9), "x", B), None);
        assert_eq!(
            waits(Some(30), Some(7_200), B).unwrap(),
            "Fair share starts them 1 h 59 min sooner (240.0× shorter)."
        );
        assert_eq!(
            waits(Some(900), Some(120), B).unwrap(),
            "The priority baseline starts them 13 min sooner (7.5× shorter)."
        );
        assert_eq!(
            waits(Some(0), Some(58), B).unwrap(),
            "Both start these within a minute."
        );
    }
}
