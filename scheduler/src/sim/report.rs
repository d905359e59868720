//! The report (DESIGN §6 names, kept exactly; extra fields only added) and its summary table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::ids::Time;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `fair-share`, `priority` or `slurm`.
    pub policy: String,
    pub horizon_s: Time,
    pub gpus: u32,
    /// Wall-clock seconds the run took: filled in by the caller (the simulator has no clock).
    pub wall_s: f64,
    pub workloads: Workloads,
    /// Busy / healthy GPU-seconds, counting only GPUs on healthy hosts.
    pub occupancy: f64,
    /// Unallocated / busy GPU-seconds.
    pub unallocated_fraction: f64,
    /// Every preemption and drain.
    pub preemptions: u64,
    pub wait_s: Waits,
    pub delivered_over_owed: DeliveredOverOwed,
    /// Every tree node, root (`""`) first, in pre-order.
    pub nodes: Vec<NodeReport>,
    /// `free-work`, `fair-share`, `fast-lane`, `reserved`, `priority`, `host-unhealthy`,
    /// `host-cordoned`, `host-down`.
    pub preemptions_by_reason: BTreeMap<String, u64>,
    /// From requeue to the next start (or the horizon), one entry per requeue.
    pub requeue_wait_s: WaitStats,
    /// Offered load: the GPU time the trace asks for (`gpus × duration_s` of every row submitted
    /// by the horizon, free work too) / healthy GPU time. It describes the input, so it reads the
    /// same for every policy.
    pub demand_over_capacity: f64,
    /// The work-conserving limit on occupancy: what it would be if work were divisible and every
    /// healthy GPU were busy whenever any submitted work was unfinished. From the input alone.
    pub occupancy_limit: f64,
    /// Occupancy under a rigid greedy reference (`sim/rigid.rs`): every workload on exactly its
    /// GPUs for its whole duration from its submission, the earliest that fits starting whenever
    /// GPUs are free, hosts ignored. From the input alone. Where it falls short of
    /// `occupancy_limit`, the gap is work that could not be split or had not arrived yet.
    pub occupancy_rigid: f64,
    /// Healthy GPU time left idle while some workload was queued, over healthy GPU time: what
    /// the run itself left on the table (work that could not fit counts too). Occupancy below
    /// the limit with this near 0 means nothing was there to run: the input, not the engine.
    pub idle_while_waiting: f64,
    /// GPU-hours of progress lost by non-resumable work that was stopped.
    pub lost_gpu_h: f64,
    /// `lost_gpu_h` by the rule that stopped the work (host-down included; the part of a
    /// segment outside the horizon is not counted in `lost_gpu_h`).
    pub lost_gpu_h_by_reason: BTreeMap<String, f64>,
    /// `lost_gpu_h` over the busy GPU-hours.
    pub lost_fraction: f64,
    /// The part of `lost_gpu_h` (DESIGN §5: ended by preemption or drain) that preemption cost,
    /// allocated and unallocated work apart: what the policy chose, not what failing hosts took.
    pub lost_to_preemption: LostByClass,
    /// Runs (start to stop of one workload on its GPUs) that ended in the second they started.
    pub zero_length_runs: u64,
    /// Runs of unallocated work that were preempted within a minute of starting.
    pub free_runs_under_a_minute: u64,
    /// The worst team's mean wait of multi-host workloads over its mean wait of single-host
    /// non-debug allocated workloads (teams with at least 5 of each; the single-host mean counts
    /// as at least a minute, so a team whose work starts at once is not divided by zero). `None`
    /// when no team has enough of both.
    pub large_over_single_wait: Option<f64>,
    /// Trace rows whose minimum runtime was cut to `--max-min-runtime`.
    pub min_runtime_capped: u64,
    /// Decision passes the engine ran.
    pub decisions: u64,
    /// Fair share's margin for preempting work that cannot resume (only under `fair-share`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_margin: Option<f64>,
    /// The SLURM peer's time limits (only under `slurm`): what its backfill planned by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limits: Option<TimeLimits>,
}

/// How the SLURM peer's time limits were made from the trace's true durations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeLimits {
    /// Limit = duration × this…
    pub factor: f64,
    /// …at most this (the partition's `MaxTime`), but never below the true duration.
    pub max_wall_s: Time,
    /// Priorities were recalculated this often (`PriorityCalcPeriod`; 0: at every decision).
    pub priority_calc_period_s: Time,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workloads {
    pub submitted: u64,
    pub completed: u64,
    /// Non-resumable work stopped by a preemption, a drain or a host going down.
    pub killed: u64,
    /// Queued or running at the horizon.
    pub unfinished: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Waits {
    pub all: WaitStats,
    /// `0 < min_runtime ≤ 15 min` and `gpus ≤ 8`.
    pub debug: WaitStats,
    /// More GPUs than the largest host.
    pub large: WaitStats,
}

/// Nearest-rank percentiles in seconds; `null` when `count` is 0.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WaitStats {
    pub count: u64,
    pub p50: Option<Time>,
    pub p90: Option<Time>,
    pub p99: Option<Time>,
}

impl WaitStats {
    /// From waits sorted ascending.
    pub fn of_sorted(sorted: &[Time]) -> WaitStats {
        let pick = |p: f64| {
            let n = sorted.len();
            (n > 0).then(|| sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
        };
        WaitStats {
            count: sorted.len() as u64,
            p50: pick(0.50),
            p90: pick(0.90),
            p99: pick(0.99),
        }
    }

    /// The same as [`WaitStats::of_sorted`] on the sorted waits, without sorting them: each
    /// percentile is selected in linear time (the slice is reordered).
    pub fn of_unsorted(waits: &mut [Time]) -> WaitStats {
        let n = waits.len();
        if n == 0 {
            return WaitStats::of_sorted(&[]);
        }
        let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        let (i50, i90, i99) = (rank(0.50), rank(0.90), rank(0.99));
        // Each selection leaves the smaller waits before it, where the next one looks.
        let p99 = *waits.select_nth_unstable(i99).1;
        let p90 = *waits[..=i99].select_nth_unstable(i90).1;
        let p50 = *waits[..=i90].select_nth_unstable(i50).1;
        WaitStats {
            count: n as u64,
            p50: Some(p50),
            p90: Some(p90),
            p99: Some(p99),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeliveredOverOwed {
    /// `Σ min(delivered, owed) / Σ owed` over the teams.
    pub overall: Option<f64>,
    /// The worst team's `delivered / owed`, capped at 1.
    pub min: Option<f64>,
    /// Leaves with something owed.
    pub teams: u64,
    pub teams_at_95pct: u64,
    /// `Σ_h min(charged_h, owed_h) / Σ_h owed_h` over the teams.
    pub hourly: Option<f64>,
}

/// GPU-hours of progress lost by non-resumable work, allocated and unallocated apart, and each
/// over the busy GPU-hours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LostByClass {
    pub allocated_gpu_h: f64,
    pub free_gpu_h: f64,
    pub allocated_fraction: f64,
    pub free_fraction: f64,
}

impl LostByClass {
    /// `allocated / free` as percentages, e.g. `0.08 / 0.61%`.
    pub fn percentages(&self) -> String {
        format!(
            "{:.2} / {:.2}%",
            100.0 * self.allocated_fraction,
            100.0 * self.free_fraction
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeReport {
    pub path: String,
    pub fraction: f64,
    /// `Σ_h min(f · C_h, demand_h)`.
    pub owed_gpu_h: f64,
    /// GPU-hours charged to it over the period (from the run segments).
    pub delivered_gpu_h: f64,
    /// The same, as the engine's ledger booked it: an audit of the incremental charging.
    pub charged_gpu_h: f64,
    /// Free (unallocated) GPU-hours its workloads ran.
    pub unallocated_gpu_h: f64,
    /// `delivered / owed`; `null` when nothing was owed.
    pub delivered_over_owed: Option<f64>,
}

impl Report {
    /// Pretty JSON, byte-identical for identical inputs (fields in declaration order).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// This run's preemptions for `reason` (0 if none).
    pub fn preemptions_for(&self, reason: &str) -> u64 {
        self.preemptions_by_reason.get(reason).copied().unwrap_or(0)
    }
}

/// Every preemption reason any of `reports` saw, sorted, once each.
pub fn preemption_reasons<'a>(reports: &[&'a Report]) -> Vec<&'a str> {
    let mut reasons: Vec<&str> = reports
        .iter()
        .flat_map(|r| r.preemptions_by_reason.keys().map(String::as_str))
        .collect();
    reasons.sort_unstable();
    reasons.dedup();
    reasons
}

/// `{"fair_share": …, "priority": …}` for `--policy both`.
pub fn both_json(fair_share: &Report, priority: &Report) -> String {
    reports_json(&[fair_share, priority])
}

/// Several policies' reports in one object, each under its policy's name (`fair_share`,
/// `priority`, `slurm`).
pub fn reports_json(reports: &[&Report]) -> String {
    let by_policy: BTreeMap<String, &Report> = reports
        .iter()
        .map(|r| (r.policy.replace('-', "_"), *r))
        .collect();
    serde_json::to_string_pretty(&by_policy).expect("a report always serialises")
}

/// A human summary, one column per report (side by side for `both`).
pub fn summary_table(reports: &[&Report]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&Report) -> String| {
        rows.push((label.to_string(), reports.iter().map(|r| f(r)).collect()));
    };
    row("policy", &|r| r.policy.clone());
    row("GPUs", &|r| r.gpus.to_string());
    row("horizon", &|r| duration(Some(r.horizon_s)));
    row("workloads submitted", &|r| {
        r.workloads.submitted.to_string()
    });
    row("  completed", &|r| r.workloads.completed.to_string());
    row("  killed (lost)", &|r| r.workloads.killed.to_string());
    row("  unfinished", &|r| r.workloads.unfinished.to_string());
    row("demand / capacity", &|r| {
        format!("{:.2}x", r.demand_over_capacity)
    });
    row("occupancy", &|r| percent(Some(r.occupancy)));
    row("  work-conserving limit", &|r| {
        percent(Some(r.occupancy_limit))
    });
    row("  rigid greedy reference", &|r| {
        percent(Some(r.occupancy_rigid))
    });
    row("  idle while work waited", &|r| {
        percent(Some(r.idle_while_waiting))
    });
    row("unallocated fraction", &|r| {
        percent(Some(r.unallocated_fraction))
    });
    row("delivered/owed overall", &|r| {
        percent(r.delivered_over_owed.overall)
    });
    row("  worst team", &|r| percent(r.delivered_over_owed.min));
    row("  teams at >= 95%", &|r| {
        format!(
            "{} of {}",
            r.delivered_over_owed.teams_at_95pct, r.delivered_over_owed.teams
        )
    });
    row("  hourly tracking", &|r| {
        percent(r.delivered_over_owed.hourly)
    });
    for (label, pick) in [
        ("wait all", 0usize),
        ("wait debug", 1),
        ("wait large", 2),
        ("requeue wait", 3),
    ] {
        let stats = move |r: &Report| -> WaitStats {
            match pick {
                0 => r.wait_s.all.clone(),
                1 => r.wait_s.debug.clone(),
                2 => r.wait_s.large.clone(),
                _ => r.requeue_wait_s.clone(),
            }
        };
        row(&format!("{label} (n)"), &|r| stats(r).count.to_string());
        row("  p50 / p90 / p99", &|r| {
            let s = stats(r);
            format!(
                "{} / {} / {}",
                duration(s.p50),
                duration(s.p90),
                duration(s.p99)
            )
        });
    }
    row("preemptions", &|r| r.preemptions.to_string());
    for reason in preemption_reasons(reports) {
        row(&format!("  {reason}"), &|r| {
            r.preemptions_for(reason).to_string()
        });
    }
    row("lost GPU-hours", &|r| {
        format!("{:.0} ({:.2}%)", r.lost_gpu_h, 100.0 * r.lost_fraction)
    });
    row("  to preemption: allocated / free", &|r| {
        r.lost_to_preemption.percentages()
    });
    row("zero-length runs", &|r| r.zero_length_runs.to_string());
    if reports.iter().any(|r| r.kill_margin.is_some()) {
        row("kill margin (fair share)", &|r| {
            r.kill_margin.map_or_else(|| "-".into(), |m| format!("{m}"))
        });
    }
    if reports.iter().any(|r| r.time_limits.is_some()) {
        row("time limits (SLURM backfill)", &|r| {
            r.time_limits.as_ref().map_or_else(
                || "-".into(),
                |t| {
                    format!(
                        "true duration x{}, at most {} (never below the duration)",
                        t.factor,
                        duration(Some(t.max_wall_s))
                    )
                },
            )
        });
        row("priorities recalculated (SLURM)", &|r| {
            r.time_limits.as_ref().map_or_else(
                || "-".into(),
                |t| match t.priority_calc_period_s {
                    0 => "at every decision".into(),
                    p => format!("every {}", duration(Some(p))),
                },
            )
        });
    }
    row("free runs preempted < 1 min", &|r| {
        r.free_runs_under_a_minute.to_string()
    });
    row("large / single-host wait (worst team)", &|r| {
        r.large_over_single_wait
            .map_or_else(|| "-".into(), |x| format!("{x:.2}x"))
    });
    row("decision passes", &|r| r.decisions.to_string());
    row("wall time", &|r| format!("{:.3} s", r.wall_s));

    if let Some(first) = reports.first() {
        rows.push((String::new(), vec![String::new(); reports.len()]));
        rows.push((
            "team: delivered / owed".into(),
            vec![String::new(); reports.len()],
        ));
        for (i, node) in first.nodes.iter().enumerate() {
            if node.path.is_empty() {
                continue;
            }
            let depth = node.path.matches('/').count();
            let label = format!(
                "{}{} ({:.1}%)",
                "  ".repeat(depth + 1),
                node.path,
                100.0 * node.fraction
            );
            let cells = reports
                .iter()
                .map(|r| {
                    let n = &r.nodes[i];
                    format!(
                        "{:.0} / {:.0} h  {}",
                        n.delivered_gpu_h,
                        n.owed_gpu_h,
                        percent(n.delivered_over_owed)
                    )
                })
                .collect();
            rows.push((label, cells));
        }
    }

    let label_width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let mut widths = vec![0; reports.len()];
    for (_, cells) in &rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (label, cells) in &rows {
        let _ = write!(out, "{label:<label_width$}");
        for (w, c) in widths.iter().zip(cells) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}

pub(crate) fn percent(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{:.1}%", 100.0 * x))
}

/// Seconds as `42 s`, `12.5 min`, `3.2 h` or `4.1 d`.
pub(crate) fn duration(s: Option<Time>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s} s"),
        Some(s) if s < 2 * 3_600 => format!("{:.1} min", s as f64 / 60.0),
        Some(s) if s < 2 * 86_400 => format!("{:.1} h", s as f64 / 3_600.0),
        Some(s) => format!("{:.1} d", s as f64 / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let waits: Vec<Time> = (1..=100).collect();
        let s = WaitStats::of_sorted(&waits);
        assert_eq!((s.p50, s.p90, s.p99), (Some(50), Some(90), Some(99)));
        assert_eq!(WaitStats::of_sorted(&[7]).p99, Some(7));
        assert_eq!(WaitStats::of_sorted(&[]).p50, None);
    }

    #[test]
    fn selecting_percentiles_gives_what_sorting_gives() {
        let mut x: u64 = 3;
        for n in [0usize, 1, 2, 3, 7, 10, 99, 100, 101, 1_000, 4_321] {
            let mut waits: Vec<Time> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    // Many ties, as real waits have (zero above all).
                    ((x >> 40) % 50) as Time * 60
                })
                .collect();
            let selected = WaitStats::of_unsorted(&mut waits.clone());
            waits.sort_unstable();
            assert_eq!(selected, WaitStats::of_sorted(&waits), "{n} waits");
        }
    }
}
