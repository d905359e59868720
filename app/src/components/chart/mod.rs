//! Charts drawn in the browser with charming (ECharts). The server renders a labelled placeholder
//! with a loading text and a caption that states the figures in words; on the client an effect
//! draws the chart once the global `echarts` is there: ECharts with only the bar and line charts
//! (public/assets/echarts-5.6.0-hourglass.min.js, built by scripts/vendor-echarts.sh), loaded by
//! [`ChartScript`] on pages with charts. The server never depends on charming.

mod activity;
#[cfg(feature = "hydrate")]
mod interop;
mod lab;
mod usage;

use crate::calendar::{civil_date, period_label as span};
use crate::lab::{TeamRow, WaitRow};
use crate::reports::{ClusterActivity, Granularity, UsageSeries};
use leptos::prelude::*;
use leptos_meta::Script;

/// Loads ECharts. Put it once on every page that shows a chart, not in the shell.
#[component]
pub fn ChartScript() -> impl IntoView {
    view! { <Script src="/assets/echarts-5.6.0-hourglass.min.js" /> }
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
    let label = usage::allocation_summary(&series);
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
    let label = usage::overview_summary(&series);
    view! { <ChartFrame id label height plot=Plot::Overview(series) /> }
}

/// p50 / p90 / p99 waits per class of workload under fair share and the priority baseline.
#[component]
pub fn WaitsChart(
    rows: Vec<WaitRow>,
    #[prop(into)] id: String,
    #[prop(default = 280)] height: u32,
) -> impl IntoView {
    let label = lab::waits_summary(&rows);
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
    let label = activity::activity_summary(&activity, kind);
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
    let label = lab::teams_summary(&rows);
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
            interop::when_ready(target.clone(), height, plot.clone(), drawn, chart, 0)
        });
        on_cleanup(move || {
            if let Some(Some(instance)) = chart.try_update_value(Option::take) {
                interop::dispose(&instance);
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
fn build(plot: &Plot, ink: Ink) -> charming::Chart {
    let frame = frame();
    match plot {
        Plot::Waits(rows) => lab::waits(frame, rows),
        Plot::Teams(rows) => lab::teams(frame, rows),
        Plot::Queue(a) => activity::queue(frame, a),
        Plot::WaitTrend(a) => activity::waits(frame, a),
        Plot::Preemptions(a) => activity::preemptions(frame, a),
        Plot::Allocation(s) | Plot::Overview(s) => usage::chart(frame, plot, s, ink),
    }
}

/// The colours a chart draws its own lines in, for the page's colour scheme (ECharts' own
/// `dark` theme does the axes, labels and tooltips).
#[cfg(feature = "hydrate")]
#[derive(Clone, Copy, Debug)]
struct Ink {
    /// The funded line: near black on light pages, near white on dark ones.
    strong: &'static str,
    /// The owed line.
    alert: &'static str,
}

#[cfg(feature = "hydrate")]
impl Ink {
    fn new(dark: bool) -> Self {
        if dark {
            Ink {
                strong: "#e4e7eb",
                alert: "#ff7b6b",
            }
        } else {
            Ink {
                strong: "#1f2933",
                alert: "#c0392b",
            }
        }
    }
}

/// What every chart shares: a transparent background (the card's colour shows through), a tooltip
/// per bucket, one legend line that scrolls when the series do not fit (a wrapped legend ran
/// into the plot and the axis name), and room for the axis labels.
#[cfg(feature = "hydrate")]
fn frame() -> charming::Chart {
    use charming::{
        component::{Grid, Legend, LegendType},
        element::{Tooltip, Trigger},
        Chart,
    };
    Chart::new()
        .background_color("transparent")
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(
            Legend::new()
                .type_(LegendType::Scroll)
                .top(0)
                .left(8)
                .right(8),
        )
        .grid(
            Grid::new()
                .left(16)
                .right(32)
                .top(56)
                .bottom(8)
                .contain_label(true),
        )
}

/// A time axis of bucket labels. Each label sits in the middle of its bucket (`boundaryGap`), so
/// the first and last are not cut at the chart's edges nor drawn over the value axis's `0`.
#[cfg(feature = "hydrate")]
fn time_axis(labels: Vec<String>) -> charming::component::Axis {
    use charming::{
        component::Axis,
        element::{AxisType, BoundaryGap},
    };
    Axis::new()
        .type_(AxisType::Category)
        .boundary_gap(BoundaryGap::CategoryAxis(true))
        .data(labels)
}

/// The last segment of a tree path; "the cluster" for the root.
fn short_name(path: &str) -> String {
    match path.rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "the cluster".to_string(),
    }
}

/// Bucket starts as axis labels: `2026-11-02`, or `11-02 14:00` for hours.
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
