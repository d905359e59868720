//! A workload's GPU utilization over time as a small line (plain SVG: no chart library for one
//! line), with its figures in words for screen readers.

use crate::workloads::Utilization;
use leptos::prelude::*;

const WIDTH: f64 = 160.0;
const HEIGHT: f64 = 32.0;

/// The line's points: buckets spread across the width, 0–100% bottom to top.
pub fn points(series: &[(i64, f64)]) -> String {
    let n = series.len();
    series
        .iter()
        .enumerate()
        .map(|(i, (_, f))| {
            let x = if n > 1 {
                i as f64 * WIDTH / (n - 1) as f64
            } else {
                WIDTH / 2.0
            };
            let y = (1.0 - f.clamp(0.0, 1.0)) * HEIGHT;
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[component]
pub fn UtilizationSpark(utilization: Utilization) -> impl IntoView {
    let (low, high) = utilization
        .series
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (_, f)| {
            (lo.min(*f), hi.max(*f))
        });
    let label = if utilization.series.is_empty() {
        "GPU utilization over time: no samples yet".to_string()
    } else {
        format!(
            "GPU utilization in 5-minute steps, from {:.0}% to {:.0}%",
            low * 100.0,
            high * 100.0
        )
    };
    view! {
        <svg class="sparkline" viewBox=format!("0 0 {WIDTH} {HEIGHT}") width=WIDTH height=HEIGHT
            role="img" aria-label=label preserveAspectRatio="none">
            <polyline points=points(&utilization.series) fill="none" stroke="currentColor" stroke-width="1.5" />
        </svg>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_full_gpu_draws_at_the_top_and_an_idle_one_at_the_bottom() {
        assert_eq!(super::points(&[(0, 1.0), (300, 0.0)]), "0.0,0.0 160.0,32.0");
        assert_eq!(super::points(&[(0, 0.5)]), "80.0,16.0");
        assert_eq!(super::points(&[]), "");
    }
}
