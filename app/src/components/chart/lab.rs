//! The simulator lab's charts: waits per class and delivered over owed per team, the three
//! policies side by side.

use crate::lab::{TeamRow, WaitRow, POLICIES};
#[cfg(feature = "hydrate")]
pub use draw::{teams, waits};

/// The lab's waits in words: each class's p90 under both policies.
pub(super) fn waits_summary(rows: &[WaitRow]) -> String {
    let p90 = |class: &str, policy: &str| {
        rows.iter()
            .find(|r| r.class == class && r.policy == policy)
            .and_then(|r| r.p90_s)
            .map(crate::workloads::sentences::duration)
            .unwrap_or_else(|| "—".into())
    };
    let parts: Vec<String> = ["all", "debug", "large", "requeue"]
        .iter()
        .map(|c| {
            let each: Vec<String> = POLICIES.iter().map(|p| p90(c, p.0)).collect();
            format!("{c} {}", each.join(" vs "))
        })
        .collect();
    format!(
        "p90 wait, fair share vs the priority baseline vs the SLURM peer: {}.",
        parts.join("; ")
    )
}

/// The lab's teams in words: the worst team under each policy.
pub(super) fn teams_summary(rows: &[TeamRow]) -> String {
    let worst = |k: usize| {
        rows.iter()
            .filter_map(|r| r.delivered_over_owed[k].map(|x| (x, r.path.as_str())))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(x, p)| format!("{p} at {:.1}%", x * 100.0))
            .unwrap_or_else(|| "no team was owed anything".into())
    };
    format!(
        "Delivered / owed for {} teams. Worst team under fair share: {}; under the priority baseline: {}; under the SLURM peer: {}.",
        rows.len(),
        worst(0),
        worst(1),
        worst(2)
    )
}

/// Drawn with charming on the client.
#[cfg(feature = "hydrate")]
mod draw {
    use super::{TeamRow, WaitRow, POLICIES};
    use charming::{
        component::Axis,
        element::{AxisLabel, AxisType},
        series::Bar,
        Chart,
    };

    const CLASSES: [&str; 4] = ["all", "debug", "large", "requeue"];

    /// Hours of wait per class: p50, p90 and p99 bars for each policy.
    pub fn waits(frame: Chart, rows: &[WaitRow]) -> Chart {
        let mut chart = frame
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .data(CLASSES.iter().map(|c| c.to_string()).collect()),
            )
            .y_axis(Axis::new().type_(AxisType::Value).name("hours"));
        for (policy, name) in POLICIES {
            for (pick, label) in [(0, "p50"), (1, "p90"), (2, "p99")] {
                let data: Vec<f64> = CLASSES
                    .iter()
                    .map(|c| {
                        rows.iter()
                            .find(|r| r.class == *c && r.policy == policy)
                            .and_then(|r| [r.p50_s, r.p90_s, r.p99_s][pick])
                            .map(|s| (s as f64 / 36.0).round() / 100.0)
                            .unwrap_or(0.0)
                    })
                    .collect();
                chart = chart.series(Bar::new().name(format!("{name} {label}")).data(data));
            }
        }
        chart
    }

    /// Delivered / owed (%) per team for each policy.
    pub fn teams(frame: Chart, rows: &[TeamRow]) -> Chart {
        let mut chart = frame
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .axis_label(AxisLabel::new().rotate(30))
                    .data(rows.iter().map(|r| r.path.clone()).collect()),
            )
            .y_axis(
                Axis::new()
                    .type_(AxisType::Value)
                    .min(0)
                    .axis_label(AxisLabel::new().formatter("{value}%")),
            );
        for (k, (_, name)) in POLICIES.iter().enumerate() {
            let data: Vec<f64> = rows
                .iter()
                .map(|r| {
                    r.delivered_over_owed[k]
                        .map(|x| (x * 1000.0).round() / 10.0)
                        .unwrap_or(0.0)
                })
                .collect();
            chart = chart.series(Bar::new().name(*name).data(data));
        }
        chart
    }
}
