//! Charts drawn in the browser with charming (ECharts). The server renders a labelled placeholder
//! with a loading text and a caption that states the figures in words; on the client an effect
//! draws the chart once the global `echarts` (public/assets/echarts.min.js, loaded by
//! [`ChartScript`] on pages with charts) is there. The server never depends on charming.

use crate::lab::{TeamRow, WaitRow};
use crate::pages::users::{civil_date, format_date};
use crate::reports::{ClusterActivity, Granularity, UsageSeries};
use leptos::prelude::*;
use leptos_meta::Script;

/// Loads ECharts. Put it once on every page that shows a chart, not in the shell.
#[component]
pub fn ChartScript() -> impl IntoView {
    view! { <Script src="/assets/echarts.min.js" /> }
}

/// What a chart shows; drawn on the client, described in words on both sides.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Plot {
    /// Funded and owed lines over bars of what each child drew and the unallocated use.
    Allocation(UsageSeries),
    /// Occupancy and unallocated fraction per bucket, from the whole cluster's series.
    Overview(UsageSeries),
    /// Wait percentiles per class of workload, both policies side by side (a lab run).
    Waits(Vec<WaitRow>),
    /// Delivered over owed per team, both policies side by side (a lab run).
    Teams(Vec<TeamRow>),
    /// Average queue depth (workloads and GPUs asked for) per bucket.
    Queue(ClusterActivity),
    /// p50 and p90 waits per class of the workloads that started in each bucket.
    WaitTrend(ClusterActivity),
    /// Preemptions and drains per bucket, stacked by reason.
    Preemptions(ClusterActivity),
}

/// Funded vs owed vs delivered vs unallocated GPU-hours per bucket for `series.lines[0]`, with
/// the children's deliveries stacked so one sees which of them drew what.
#[component]
pub fn AllocationChart(
    series: UsageSeries,
    /// The element id the chart is drawn into; unique on the page.
    #[prop(into)]
    id: String,
    #[prop(default = 320)] height: u32,
) -> impl IntoView {
    let label = allocation_summary(&series);
    view! { <ChartFrame id label height plot=Plot::Allocation(series) /> }
}

/// Occupancy (busy over healthy GPU-hours) and unallocated fraction (unallocated over busy) per
/// bucket, from the whole cluster's series.
#[component]
pub fn OverviewChart(
    series: UsageSeries,
    #[prop(into)] id: String,
    #[prop(default = 220)] height: u32,
) -> impl IntoView {
    let label = overview_summary(&series);
    view! { <ChartFrame id label height plot=Plot::Overview(series) /> }
}

/// p50 / p90 / p99 waits per class of workload under fair share and the priority baseline.
#[component]
pub fn WaitsChart(
    rows: Vec<WaitRow>,
    #[prop(into)] id: String,
    #[prop(default = 280)] height: u32,
) -> impl IntoView {
    let label = waits_summary(&rows);
    view! { <ChartFrame id label height plot=Plot::Waits(rows) /> }
}

/// One of the cluster activity charts: `kind` is `queue`, `waits` or `preemptions`.
#[component]
pub fn ActivityChart(
    activity: ClusterActivity,
    kind: &'static str,
    #[prop(into)] id: String,
    #[prop(default = 240)] height: u32,
) -> impl IntoView {
    let label = activity_summary(&activity, kind);
    let plot = match kind {
        "queue" => Plot::Queue(activity),
        "waits" => Plot::WaitTrend(activity),
        _ => Plot::Preemptions(activity),
    };
    view! { <ChartFrame id label height plot /> }
}

/// Each team's delivered / owed under fair share and the priority baseline.
#[component]
pub fn TeamsChart(
    rows: Vec<TeamRow>,
    #[prop(into)] id: String,
    #[prop(default = 300)] height: u32,
) -> impl IntoView {
    let label = teams_summary(&rows);
    view! { <ChartFrame id label height plot=Plot::Teams(rows) /> }
}

#[component]
fn ChartFrame(id: String, label: String, height: u32, plot: Plot) -> impl IntoView {
    // `None` while loading, then whether it was drawn.
    let drawn = RwSignal::new(None::<bool>);
    #[cfg(feature = "hydrate")]
    {
        let chart = StoredValue::new_local(None::<charming::Echarts>);
        let target = id.clone();
        Effect::new(move |_| {
            draw::when_ready(target.clone(), height, plot.clone(), drawn, chart, 0)
        });
        on_cleanup(move || {
            if let Some(Some(instance)) = chart.try_update_value(Option::take) {
                draw::dispose(&instance);
            }
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = plot;
    view! {
        <figure class="chart">
            <div class="chart-area" style=format!("height: {height}px")>
                <div class="chart-canvas" id=id role="img" aria-label=label.clone()></div>
                <p class="chart-status" aria-live="polite" hidden=move || drawn.get() == Some(true)>
                    {move || match drawn.get() {
                        Some(false) => "The chart could not be drawn; the figures are below.",
                        _ => "Loading chart…",
                    }}
                </p>
            </div>
            <figcaption>{label}</figcaption>
        </figure>
    }
}

#[cfg(feature = "hydrate")]
mod draw {
    use super::{build, Plot};
    use charming::{Echarts, WasmRenderer};
    use leptos::prelude::*;
    use std::time::Duration;
    use web_sys::js_sys::{Function, Reflect};
    use web_sys::wasm_bindgen::{JsCast, JsValue};

    /// How long to wait for echarts.min.js and the element, in 50 ms steps (the script loads
    /// asynchronously after a client-side navigation).
    const TRIES: u32 = 400;

    pub fn when_ready(
        id: String,
        height: u32,
        plot: Plot,
        drawn: RwSignal<Option<bool>>,
        chart: StoredValue<Option<Echarts>, LocalStorage>,
        tries: u32,
    ) {
        if drawn.try_get_untracked().is_none() {
            // The chart left the page.
            return;
        }
        let Some(window) = web_sys::window() else {
            return;
        };
        let ready = Reflect::has(&window, &JsValue::from_str("echarts")).unwrap_or(false);
        // After a client-side change the new element may not be in the document yet.
        let element = window.document().and_then(|d| d.get_element_by_id(&id));
        let Some(element) = element.filter(|_| ready) else {
            if tries < TRIES {
                set_timeout(
                    move || when_ready(id, height, plot, drawn, chart, tries + 1),
                    Duration::from_millis(50),
                );
            } else {
                leptos::logging::error!("echarts or #{id} missing; chart not drawn");
                drawn.try_set(Some(false));
            }
            return;
        };
        let width = u32::try_from(element.client_width()).unwrap_or(0).max(280);
        match WasmRenderer::new(width, height).render(&id, &build(&plot)) {
            Ok(instance) => {
                if let Some(Some(old)) = chart.try_update_value(|c| c.replace(instance)) {
                    dispose(&old);
                }
                drawn.try_set(Some(true));
            }
            Err(error) => {
                leptos::logging::error!("chart {id}: {error:?}");
                drawn.try_set(Some(false));
            }
        }
    }

    /// Frees an ECharts instance (its canvas and listeners).
    pub fn dispose(instance: &Echarts) {
        let this: &JsValue = instance.as_ref();
        if let Ok(f) = Reflect::get(this, &JsValue::from_str("dispose")) {
            if let Some(f) = f.dyn_ref::<Function>() {
                let _ = f.call0(this);
            }
        }
    }
}

#[cfg(feature = "hydrate")]
fn build(plot: &Plot) -> charming::Chart {
    match plot {
        Plot::Waits(rows) => lab_charts::waits(rows),
        Plot::Teams(rows) => lab_charts::teams(rows),
        Plot::Queue(a) => activity_charts::queue(a),
        Plot::WaitTrend(a) => activity_charts::waits(a),
        Plot::Preemptions(a) => activity_charts::preemptions(a),
        Plot::Allocation(s) | Plot::Overview(s) => usage(plot, s),
    }
}

#[cfg(feature = "hydrate")]
fn usage(plot: &Plot, series: &UsageSeries) -> charming::Chart {
    use charming::{
        component::{Axis, Grid, Legend},
        element::{AxisLabel, AxisType, ItemStyle, LineStyle, LineStyleType, Tooltip, Trigger},
        series::{Bar, Line},
        Chart,
    };
    let round = |v: &f64| (v * 10.0).round() / 10.0;
    let categories = bucket_labels(series);
    let chart = Chart::new()
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new().top(0))
        .grid(
            Grid::new()
                .left(8)
                .right(16)
                .top(40)
                .bottom(8)
                .contain_label(true),
        )
        .x_axis(Axis::new().type_(AxisType::Category).data(categories));
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
                        .line_style(LineStyle::new().width(2).color("#1f2933"))
                        .item_style(ItemStyle::new().color("#1f2933"))
                        .data(node.funded.iter().map(round).collect()),
                )
                .series(
                    Line::new()
                        .name("Owed")
                        .show_symbol(false)
                        .line_style(
                            LineStyle::new()
                                .width(2)
                                .type_(LineStyleType::Dashed)
                                .color("#c0392b"),
                        )
                        .item_style(ItemStyle::new().color("#c0392b"))
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

/// An activity chart in words.
fn activity_summary(a: &ClusterActivity, kind: &str) -> String {
    let period = span(a.from, a.to);
    match kind {
        "queue" => {
            let peak = a.queue_depth.iter().copied().fold(0.0, f64::max);
            let mean = if a.queue_depth.is_empty() {
                0.0
            } else {
                a.queue_depth.iter().sum::<f64>() / a.queue_depth.len() as f64
            };
            format!(
                "Workloads waiting per {}, {period}: {mean:.1} on average, {peak:.1} at the busiest.",
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
                .map(|r| format!("{} {}", r.reason, r.counts.iter().sum::<u64>()))
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

/// The lab's waits in words: each class's p90 under both policies.
fn waits_summary(rows: &[WaitRow]) -> String {
    let p90 = |class: &str, policy: &str| {
        rows.iter()
            .find(|r| r.class == class && r.policy == policy)
            .and_then(|r| r.p90_s)
            .map(crate::workloads::sentences::duration)
            .unwrap_or_else(|| "—".into())
    };
    let parts: Vec<String> = ["all", "debug", "large", "requeue"]
        .iter()
        .map(|c| format!("{c} {} vs {}", p90(c, "fair-share"), p90(c, "priority")))
        .collect();
    format!(
        "p90 wait, fair share vs the priority baseline: {}.",
        parts.join("; ")
    )
}

/// The lab's teams in words: the worst team under each policy.
fn teams_summary(rows: &[TeamRow]) -> String {
    let worst = |k: usize| {
        rows.iter()
            .filter_map(|r| r.delivered_over_owed[k].map(|x| (x, r.path.as_str())))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(x, p)| format!("{p} at {:.1}%", x * 100.0))
            .unwrap_or_else(|| "no team was owed anything".into())
    };
    format!(
        "Delivered / owed for {} teams. Worst team under fair share: {}; under the priority baseline: {}.",
        rows.len(),
        worst(0),
        worst(1)
    )
}

/// The last segment of a tree path; "the cluster" for the root.
fn short_name(path: &str) -> String {
    match path.rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "the cluster".to_string(),
    }
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

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
fn labels(buckets: &[i64], granularity: Granularity) -> Vec<String> {
    let hourly = granularity == Granularity::Hour;
    buckets
        .iter()
        .map(|b| {
            let (y, m, d) = civil_date(*b);
            if hourly {
                format!("{m:02}-{d:02} {:02}:00", b.rem_euclid(86_400) / 3_600)
            } else {
                format!("{y}-{m:02}-{d:02}")
            }
        })
        .collect()
}

/// `2026-10-01 to 2026-12-31` for `[from, to)`.
fn span(from: i64, to: i64) -> String {
    format!("{} to {}", format_date(from), format_date(to - 1))
}

fn period(series: &UsageSeries) -> String {
    span(series.from, series.to)
}

/// The allocation chart in words: the node's totals and what each child drew.
fn allocation_summary(series: &UsageSeries) -> String {
    let Some(node) = series.lines.first() else {
        return format!("No usage data for {}.", period(series));
    };
    let total = |v: &[f64]| v.iter().sum::<f64>() + 0.0;
    let mut text = format!(
        "GPU-hours per {} for {}, {}: funded {:.1}, owed {:.1}, delivered {:.1}, unallocated use {:.1}.",
        series.granularity,
        short_name(&node.path),
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
    text
}

/// The overview chart in words: the period's occupancy and unallocated fraction and the range
/// of the daily occupancy.
fn overview_summary(series: &UsageSeries) -> String {
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
        "Cluster occupancy {}: {} of healthy GPU-hours busy; unallocated use {} of busy time.{range}",
        period(series),
        pct(busy, funded),
        pct(free, busy),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::UsageLine;

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
        let text = overview_summary(&s);
        assert!(text.contains("50.0% of healthy GPU-hours busy"), "{text}");
        assert!(text.contains("from 25.0% to 75.0%"), "{text}");
    }
}

/// The lab's two charts (drawn with charming on the client).
#[cfg(feature = "hydrate")]
mod lab_charts {
    use crate::lab::{TeamRow, WaitRow};
    use charming::{
        component::{Axis, Grid, Legend},
        element::{AxisLabel, AxisType, Tooltip, Trigger},
        series::Bar,
        Chart,
    };

    const CLASSES: [&str; 4] = ["all", "debug", "large", "requeue"];

    fn frame() -> Chart {
        Chart::new()
            .tooltip(Tooltip::new().trigger(Trigger::Axis))
            .legend(Legend::new().top(0))
            .grid(
                Grid::new()
                    .left(8)
                    .right(16)
                    .top(48)
                    .bottom(8)
                    .contain_label(true),
            )
    }

    /// Hours of wait per class: p50, p90 and p99 bars for each policy.
    pub fn waits(rows: &[WaitRow]) -> Chart {
        let mut chart = frame()
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .data(CLASSES.iter().map(|c| c.to_string()).collect()),
            )
            .y_axis(Axis::new().type_(AxisType::Value).name("hours"));
        for (policy, name) in [("fair-share", "Fair share"), ("priority", "Baseline")] {
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
    pub fn teams(rows: &[TeamRow]) -> Chart {
        let mut chart = frame()
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
        for (k, name) in [(0, "Fair share"), (1, "Priority baseline")] {
            let data: Vec<f64> = rows
                .iter()
                .map(|r| {
                    r.delivered_over_owed[k]
                        .map(|x| (x * 1000.0).round() / 10.0)
                        .unwrap_or(0.0)
                })
                .collect();
            chart = chart.series(Bar::new().name(name).data(data));
        }
        chart
    }
}

/// The cluster activity charts (drawn with charming on the client).
#[cfg(feature = "hydrate")]
mod activity_charts {
    use super::labels;
    use crate::reports::ClusterActivity;
    use charming::{
        component::{Axis, Grid, Legend},
        element::{AxisType, Tooltip, Trigger},
        series::{Bar, Line},
        Chart,
    };

    fn frame(a: &ClusterActivity, unit: &str) -> Chart {
        Chart::new()
            .tooltip(Tooltip::new().trigger(Trigger::Axis))
            .legend(Legend::new().top(0))
            .grid(
                Grid::new()
                    .left(24)
                    .right(16)
                    .top(40)
                    .bottom(8)
                    .contain_label(true),
            )
            .x_axis(
                Axis::new()
                    .type_(AxisType::Category)
                    .data(labels(&a.buckets, a.granularity)),
            )
            .y_axis(Axis::new().type_(AxisType::Value).name(unit))
    }

    pub fn queue(a: &ClusterActivity) -> Chart {
        let round = |v: &f64| (v * 10.0).round() / 10.0;
        frame(a, "average")
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

    pub fn waits(a: &ClusterActivity) -> Chart {
        let minutes = |v: &Option<i64>| v.map(|s| (s as f64 / 6.0).round() / 10.0);
        let mut chart = frame(a, "minutes");
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

    pub fn preemptions(a: &ClusterActivity) -> Chart {
        let mut chart = frame(a, "count");
        for r in &a.preemptions {
            chart = chart.series(
                Bar::new()
                    .name(r.reason.clone())
                    .stack("reasons")
                    .data(r.counts.iter().map(|c| *c as f64).collect()),
            );
        }
        chart
    }
}
