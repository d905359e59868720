//! The cluster activity charts: queue depth, waits per class, preemptions and drains by reason.

use super::span;
use crate::reports::ClusterActivity;
#[cfg(feature = "hydrate")]
pub use draw::{preemptions, queue, waits};

/// An activity chart in words.
pub(super) fn activity_summary(a: &ClusterActivity, kind: &str) -> String {
    let period = span(a.from, a.to);
    match kind {
        "queue" => {
            let peak = a.queue_peak.iter().copied().max().unwrap_or(0);
            let mean = if a.queue_depth.is_empty() {
                0.0
            } else {
                a.queue_depth.iter().sum::<f64>() / a.queue_depth.len() as f64
            };
            format!(
                "Workloads waiting per {}, {period}: {mean:.1} on average over time, {peak} at once at the most.",
                a.granularity
            )
        }
        "waits" => {
            let worst = |class: &str| {
                a.waits
                    .iter()
                    .find(|w| w.class == class)
                    .and_then(|w| w.p90_s.iter().flatten().max().copied())
                    .map(crate::workloads::sentences::duration)
                    .unwrap_or_else(|| "—".into())
            };
            format!(
                "Wait before the first start per {}, {period}; the worst p90: all {}, debug {}, large {}.",
                a.granularity,
                worst("all"),
                worst("debug"),
                worst("large")
            )
        }
        _ => {
            let parts: Vec<String> = a
                .preemptions
                .iter()
                .map(|r| format!("{} {}", r.reason.as_str(), r.counts.iter().sum::<u64>()))
                .collect();
            if parts.is_empty() {
                format!("No preemptions or drains, {period}.")
            } else {
                format!(
                    "Preemptions and drains by reason, {period}: {}.",
                    parts.join(", ")
                )
            }
        }
    }
}

/// Drawn with charming on the client.
#[cfg(feature = "hydrate")]
mod draw {
    use super::super::{labels, time_axis};
    use super::ClusterActivity;
    use charming::{
        component::Axis,
        element::AxisType,
        series::{Bar, Line},
        Chart,
    };

    fn axes(frame: Chart, a: &ClusterActivity, unit: &str) -> Chart {
        frame
            .x_axis(time_axis(labels(&a.buckets, a.granularity)))
            .y_axis(Axis::new().type_(AxisType::Value).min(0).name(unit))
    }

    pub fn queue(frame: Chart, a: &ClusterActivity) -> Chart {
        let round = |v: &f64| (v * 10.0).round() / 10.0;
        axes(frame, a, "average")
            .series(
                Line::new()
                    .name("Workloads waiting")
                    .show_symbol(false)
                    .data(a.queue_depth.iter().map(round).collect()),
            )
            .series(
                Line::new()
                    .name("GPUs asked for")
                    .show_symbol(false)
                    .data(a.queued_gpus.iter().map(round).collect()),
            )
    }

    pub fn waits(frame: Chart, a: &ClusterActivity) -> Chart {
        let minutes = |v: &Option<i64>| v.map(|s| (s as f64 / 6.0).round() / 10.0);
        let mut chart = axes(frame, a, "minutes");
        for w in &a.waits {
            for (label, values) in [("p50", &w.p50_s), ("p90", &w.p90_s)] {
                chart = chart.series(
                    Line::new()
                        .name(format!("{} {label}", w.class))
                        .connect_nulls(true)
                        .data(values.iter().map(minutes).collect()),
                );
            }
        }
        chart
    }

    pub fn preemptions(frame: Chart, a: &ClusterActivity) -> Chart {
        let mut chart = axes(frame, a, "count");
        if a.preemptions.is_empty() {
            // A zero line keeps the value axis (and so the label margins) of a quiet period.
            chart = chart.series(
                Bar::new()
                    .name("Preemptions and drains")
                    .data(vec![0.0; a.buckets.len()]),
            );
        }
        for r in &a.preemptions {
            chart = chart.series(
                Bar::new()
                    .name(r.reason.as_str())
                    .stack("reasons")
                    .data(r.counts.iter().map(|c| *c as f64).collect()),
            );
        }
        chart
    }
}
