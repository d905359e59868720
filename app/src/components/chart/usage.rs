//! The usage charts: a node's funded, owed and delivered GPU-hours with what each child drew,
//! and the cluster's occupancy.

use super::{labels, short_name, span};
#[cfg(feature = "hydrate")]
use super::{Ink, Plot};
use crate::reports::UsageSeries;

#[cfg(feature = "hydrate")]
pub(super) fn chart(
    frame: charming::Chart,
    plot: &Plot,
    series: &UsageSeries,
    ink: Ink,
) -> charming::Chart {
    use charming::{
        component::Axis,
        element::{AxisLabel, AxisType, ItemStyle, LineStyle, LineStyleType},
        series::{Bar, Line},
    };
    let round = |v: &f64| (v * 10.0).round() / 10.0;
    let categories = bucket_labels(series);
    let chart = frame.x_axis(super::time_axis(categories));
    let Some(node) = series.lines.first() else {
        return chart.y_axis(Axis::new().type_(AxisType::Value));
    };
    match plot {
        Plot::Allocation(_) => {
            let mut chart = chart.y_axis(Axis::new().type_(AxisType::Value).name("GPU-h"));
            let children = &series.lines[1..];
            if children.is_empty() {
                chart = chart.series(
                    Bar::new()
                        .name("Delivered")
                        .stack("used")
                        .data(node.delivered.iter().map(round).collect()),
                );
            }
            for child in children {
                chart = chart.series(
                    Bar::new()
                        .name(short_name(&child.path))
                        .stack("used")
                        .data(child.delivered.iter().map(round).collect()),
                );
            }
            chart
                .series(
                    Bar::new()
                        .name("Unallocated use")
                        .stack("used")
                        .item_style(ItemStyle::new().color("#9aa5b1"))
                        .data(node.unallocated.iter().map(round).collect()),
                )
                .series(
                    Line::new()
                        .name("Funded")
                        .show_symbol(false)
                        .line_style(LineStyle::new().width(2).color(ink.strong))
                        .item_style(ItemStyle::new().color(ink.strong))
                        .data(node.funded.iter().map(round).collect()),
                )
                .series(
                    // A diamond on the funded line in each bucket where a share changed.
                    Line::new()
                        .name("Share changed")
                        .symbol(charming::element::Symbol::Diamond)
                        .symbol_size(12)
                        .line_style(LineStyle::new().width(0))
                        .item_style(ItemStyle::new().color(ink.alert))
                        .data(
                            share_marks(series)
                                .iter()
                                .map(|v| v.map(|v| round(&v)))
                                .collect(),
                        ),
                )
                .series(
                    Line::new()
                        .name("Owed")
                        .show_symbol(false)
                        .line_style(
                            LineStyle::new()
                                .width(2)
                                .type_(LineStyleType::Dashed)
                                .color(ink.alert),
                        )
                        .item_style(ItemStyle::new().color(ink.alert))
                        .data(node.owed.iter().map(round).collect()),
                )
        }
        _ => {
            let (occupancy, unallocated) = fractions(series);
            let pct = |v: &Option<f64>| v.map(|x| round(&(x * 100.0)));
            chart
                .y_axis(
                    Axis::new()
                        .type_(AxisType::Value)
                        .min(0)
                        .max(100)
                        .axis_label(AxisLabel::new().formatter("{value}%")),
                )
                .series(
                    Line::new()
                        .name("Occupancy")
                        .show_symbol(false)
                        .data(occupancy.iter().map(pct).collect()),
                )
                .series(
                    Line::new()
                        .name("Unallocated fraction")
                        .show_symbol(false)
                        .data(unallocated.iter().map(pct).collect()),
                )
        }
    }
}

/// Per bucket: the node's funded GPU-hours where a share changed in it, else nothing.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn share_marks(series: &UsageSeries) -> Vec<Option<f64>> {
    let Some(node) = series.lines.first() else {
        return Vec::new();
    };
    let mut marks = vec![None; series.buckets.len()];
    for change in &series.share_changes {
        let i = series.buckets.partition_point(|&b| b <= change.at);
        if let Some(i) = i.checked_sub(1) {
            marks[i] = node.funded.get(i).copied();
        }
    }
    marks
}

/// Per bucket of the node's line: occupancy (busy over funded — at the root, healthy capacity)
/// and unallocated fraction (unallocated over busy); `None` where the denominator is zero.
#[allow(clippy::type_complexity)]
fn fractions(series: &UsageSeries) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let Some(node) = series.lines.first() else {
        return (Vec::new(), Vec::new());
    };
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    node.funded
        .iter()
        .zip(&node.delivered)
        .zip(&node.unallocated)
        .map(|((funded, delivered), free)| {
            let busy = delivered + free;
            (ratio(busy, *funded), ratio(*free, busy))
        })
        .unzip()
}

/// `2026-11-02` (day and week buckets) or `11-02 14:00` (hour buckets).
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn bucket_labels(series: &UsageSeries) -> Vec<String> {
    labels(&series.buckets, series.granularity)
}

fn period(series: &UsageSeries) -> String {
    span(series.from, series.to)
}

/// " on west" for a series of one cluster; nothing for every cluster together.
fn on_cluster(series: &UsageSeries) -> String {
    if series.cluster.is_empty() {
        String::new()
    } else {
        format!(" on {}", series.cluster)
    }
}

/// The allocation chart in words: the node's totals and what each child drew.
pub(super) fn allocation_summary(series: &UsageSeries) -> String {
    let Some(node) = series.lines.first() else {
        return format!("No usage data for {}.", period(series));
    };
    let total = |v: &[f64]| v.iter().sum::<f64>() + 0.0;
    let mut text = format!(
        "GPU-hours per {} for {}{}, {}: funded {:.1}, owed {:.1}, delivered {:.1}, unallocated use {:.1}.",
        series.granularity,
        short_name(&node.path),
        on_cluster(series),
        period(series),
        total(&node.funded),
        total(&node.owed),
        total(&node.delivered),
        total(&node.unallocated),
    );
    let drawn: Vec<String> = series.lines[1..]
        .iter()
        .map(|c| format!("{} {:.1}", short_name(&c.path), total(&c.delivered)))
        .collect();
    if !drawn.is_empty() {
        text.push_str(&format!(" Delivered by child: {}.", drawn.join(", ")));
    }
    let changed: Vec<String> = series
        .share_changes
        .iter()
        .map(|c| {
            format!(
                "{} to {} on {}",
                short_name(&c.path),
                c.share,
                crate::calendar::format_date(c.at)
            )
        })
        .collect();
    if !changed.is_empty() {
        text.push_str(&format!(" Shares changed: {}.", changed.join(", ")));
    }
    text
}

/// The overview chart in words: the period's occupancy and unallocated fraction and the range
/// of the daily occupancy.
pub(super) fn overview_summary(series: &UsageSeries) -> String {
    let Some(node) = series.lines.first() else {
        return format!("No usage data for {}.", period(series));
    };
    let funded: f64 = node.funded.iter().sum();
    let delivered: f64 = node.delivered.iter().sum();
    let free: f64 = node.unallocated.iter().sum();
    let busy = delivered + free;
    let pct = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.1}%", a / b * 100.0)
        } else {
            "—".to_string()
        }
    };
    let (occupancy, _) = fractions(series);
    let known: Vec<f64> = occupancy.into_iter().flatten().collect();
    let range = match (
        known.iter().copied().reduce(f64::min),
        known.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => format!(
            " Per {}, occupancy ranged from {:.1}% to {:.1}%.",
            series.granularity,
            lo * 100.0,
            hi * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "Cluster occupancy{} {}: {} of healthy GPU-hours busy; unallocated use {} of busy time.{range}",
        on_cluster(series),
        period(series),
        pct(busy, funded),
        pct(free, busy),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::{Granularity, ShareMark, UsageLine};

    fn series() -> UsageSeries {
        let line = |path: &str, delivered: Vec<f64>, free: Vec<f64>| UsageLine {
            path: path.into(),
            funded: vec![24.0, 24.0],
            owed: vec![10.0, 12.0],
            delivered,
            unallocated: free,
        };
        UsageSeries {
            node: String::new(),
            from: 1_782_864_000,
            to: 1_782_864_000 + 2 * 86_400,
            granularity: Granularity::Day,
            buckets: vec![1_782_864_000, 1_782_864_000 + 86_400],
            cluster: String::new(),
            share_changes: vec![ShareMark {
                at: 1_782_864_000 + 86_400 + 3_600,
                path: "ai/olmo".into(),
                share: 2.0,
            }],
            lines: vec![
                line("", vec![12.0, 6.0], vec![6.0, 0.0]),
                line("ai", vec![12.0, 6.0], vec![6.0, 0.0]),
            ],
        }
    }

    #[test]
    fn occupancy_is_busy_over_funded_and_unallocated_is_over_busy() {
        let (occupancy, unallocated) = fractions(&series());
        assert_eq!(occupancy, vec![Some(0.75), Some(0.25)]);
        assert_eq!(unallocated, vec![Some(6.0 / 18.0), Some(0.0)]);
    }

    #[test]
    fn the_summaries_state_the_totals_in_words() {
        let s = series();
        assert_eq!(bucket_labels(&s), vec!["2026-07-01", "2026-07-02"]);
        let text = allocation_summary(&s);
        assert!(
            text.contains("funded 48.0, owed 22.0, delivered 18.0, unallocated use 6.0"),
            "{text}"
        );
        assert!(text.contains("Delivered by child: ai 18.0."), "{text}");
        assert!(
            text.ends_with("Shares changed: olmo to 2 on 2026-07-02."),
            "{text}"
        );
        assert_eq!(share_marks(&s), vec![None, Some(24.0)]);
        let text = overview_summary(&s);
        assert!(text.contains("50.0% of healthy GPU-hours busy"), "{text}");
        assert!(text.contains("from 25.0% to 75.0%"), "{text}");
        assert!(text.starts_with("Cluster occupancy 2026-07-01"), "{text}");
    }

    #[test]
    fn a_series_of_one_cluster_names_it() {
        let s = UsageSeries {
            cluster: "west".into(),
            ..series()
        };
        assert!(overview_summary(&s).starts_with("Cluster occupancy on west 2026-07-01"));
        assert!(allocation_summary(&s).starts_with("GPU-hours per day for the cluster on west, "));
    }
}
