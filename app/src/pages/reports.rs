//! Quarterly review for leadership: funded vs owed vs delivered per program and project, with the
//! headline figures the reference reports; CSV export and a print-friendly layout.

use super::made_once::MadeOnce;
use crate::{
    budget::{api::get_tree, TreeNodeView},
    clock::now_s,
    components::chart::{ActivityChart, AllocationChart, ChartScript, OverviewChart},
    components::cluster_filter::{cluster_from_query, use_clusters, ClusterFilter},
    components::tree_toggle::{Collapsed, TreeToggle},
    nodes::ClusterSummary,
    reports::{
        api::{
            cluster_activity, people_usage, period_review, quarter_trend, quarterly_review,
            usage_series,
        },
        explain::shortfalls,
        ClusterActivity, PersonUsage, Review, Trend, UsageSeries,
    },
    workloads::sentences::duration_or_dash,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};

/// `12.3%`, or "—" for nothing (`+ 0.0` turns -0.0 into 0.0).
pub(crate) fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.1}%", v * 100.0 + 0.0))
        .unwrap_or_else(|| "—".into())
}

fn gpu_h(x: f64) -> String {
    // `+ 0.0` turns an empty sum's -0.0 into 0.0.
    format!("{:.1}", x + 0.0)
}

use crate::calendar::Fiscal;
use crate::error::AppError;

/// What the review's parts load, made once per period (or quarter) under the page: see
/// [`MadeOnce`] — a server render builds the review's view more than once.
#[derive(Clone, Copy)]
struct Made {
    charts: MadeOnce<(i64, i64), ChartData>,
    trends: MadeOnce<(i32, u32), Resource<Result<Trend, AppError>>>,
    people: MadeOnce<(i64, i64), PeopleData>,
}

/// The cluster the review's usage charts show (empty: every cluster together), from `?cluster=`,
/// and the clusters to choose from — made with the page, not under the review's view, which a
/// server render may build more than once (see [`MadeOnce`]).
#[derive(Clone, Copy)]
struct ChartCluster {
    chosen: RwSignal<String>,
    clusters: Resource<Vec<ClusterSummary>>,
}

/// The charts' data for one period.
#[derive(Clone, Copy)]
struct ChartData {
    overview: Resource<Result<UsageSeries, AppError>>,
    allocation: Resource<Result<UsageSeries, AppError>>,
    activity_granularity: RwSignal<String>,
    activity: Resource<Result<ClusterActivity, AppError>>,
    tree: Resource<Result<Vec<TreeNodeView>, AppError>>,
}

/// The people table's choice and data for one period.
#[derive(Clone, Copy)]
struct PeopleData {
    path: RwSignal<String>,
    people: Resource<Result<Vec<PersonUsage>, AppError>>,
}

#[component]
pub fn ReportsPage() -> impl IntoView {
    // The quarter shown is the one in the URL (`?year=2026&quarter=3`, a fiscal year and quarter),
    // so it can be shared and bookmarked; without one, this quarter (the server knows the
    // organisation's fiscal calendar).
    let query = use_query_map();
    let year = Memo::new(move |_| query.read().get("year").and_then(|y| y.parse::<i32>().ok()));
    let quarter = Memo::new(move |_| {
        query
            .read()
            .get("quarter")
            .and_then(|q| q.parse::<u32>().ok())
            .filter(|q| (1..=4).contains(q))
    });
    let navigate = use_navigate();
    let show = move |y: i32, q: u32| {
        navigate(
            &format!("/reports?year={y}&quarter={q}"),
            leptos_router::NavigateOptions {
                replace: true,
                scroll: false,
                ..Default::default()
            },
        )
    };
    let show_year = show.clone();
    // Any period instead (`?from=2026-10-01&to=2026-11-15`, both days included).
    let period = Memo::new(move |_| {
        let q = query.read();
        match (q.get("from"), q.get("to")) {
            (Some(from), Some(to)) if !from.is_empty() || !to.is_empty() => Some((from, to)),
            _ => None,
        }
    });
    // The tree node the allocation chart shows (empty: the whole cluster) and its buckets.
    let node = RwSignal::new(String::new());
    let granularity = RwSignal::new("day".to_string());
    provide_context(ChartCluster {
        chosen: cluster_from_query(),
        clusters: use_clusters(),
    });
    provide_context(Made {
        charts: MadeOnce::new(),
        trends: MadeOnce::new(),
        people: MadeOnce::new(),
    });
    let review = Resource::new(
        move || (year.get(), quarter.get(), period.get()),
        |(y, q, period)| async move {
            match period {
                Some((from, to)) => period_review(from, to, true).await,
                None => quarterly_review(y, q, true).await,
            }
        },
    );
    // Learnt from the review loaded: the fiscal calendar, the quarter it covers and the first
    // year with data (the picker offers no earlier one).
    let fiscal = RwSignal::new(Fiscal::default());
    let shown = RwSignal::new(None::<(i32, u32)>);
    let first_year = RwSignal::new(None::<i32>);
    Effect::new(move || {
        if let Some(Ok(r)) = review.get() {
            let f = Fiscal::starting(r.fiscal_start_month).unwrap_or_default();
            let this_year = f.quarter_of(now_s()).0;
            fiscal.set(f);
            shown.set(r.quarter);
            first_year.set(Some(
                r.data_since
                    .map_or(this_year, |t| f.quarter_of(t).0)
                    .min(this_year),
            ));
        }
    });
    let this = move || fiscal.get().quarter_of(now_s());
    // The year and quarter the pickers show: the review's, else the URL's, else this one.
    let picked = move || {
        shown
            .get()
            .or_else(|| year.get().zip(quarter.get()))
            .unwrap_or_else(this)
    };
    let title = move || match (period.get(), shown.get()) {
        (Some((from, to)), _) => format!("Review: {from} to {to}"),
        (None, Some((y, q))) => format!("Quarterly review: {}", fiscal.get().quarter_label(y, q)),
        (None, None) => "Quarterly review".to_string(),
    };
    let year_name = move |y: i32| {
        if fiscal.get().start_month() == 1 {
            y.to_string()
        } else {
            format!("FY{y}")
        }
    };
    view! {
        <Title text=title />
        <ChartScript />
        <div class="page-head">
            <h1>{title}</h1>
            <div class="actions no-print">
                <button type="button" class="button-quiet" on:click=move |_| print()>"Print"</button>
            </div>
        </div>
        <div class="filters no-print" role="group" aria-label="Choose a quarter">
            <label for="year">{move || if fiscal.get().start_month() == 1 { "Year" } else { "Fiscal year" }}</label>
            <select id="year" on:change=move |ev| show_year(event_target_value(&ev).parse().unwrap_or(this().0), picked().1)>
                {move || {
                    let this_year = this().0;
                    (first_year.get().unwrap_or(this_year)..=this_year).rev().map(|y| view! {
                        <option value=y.to_string() selected=move || y == picked().0>{year_name(y)}</option>
                    }).collect_view()
                }}
            </select>
            <label for="quarter">"Quarter"</label>
            <select id="quarter" on:change=move |ev| show(picked().0, event_target_value(&ev).parse().unwrap_or(1))>
                {(1..=4u32).map(|q| {
                    let to_come = move || {
                        let (this_year, this_quarter) = this();
                        picked().0 == this_year && q > this_quarter
                    };
                    view! {
                        <option value=q.to_string() selected=move || q == picked().1 disabled=to_come>
                            {format!("Q{q}")}
                        </option>
                    }
                }).collect_view()}
            </select>
        </div>
        <form class="filters no-print" method="get" action="/reports" aria-label="Choose any period">
            <label for="period-from">"From"</label>
            <input id="period-from" name="from" type="date" required
                value=move || period.get().map(|p| p.0).unwrap_or_default() />
            <label for="period-to">"To (included)"</label>
            <input id="period-to" name="to" type="date" required
                value=move || period.get().map(|p| p.1).unwrap_or_default() />
            <button type="submit" class="button-quiet">"Show period"</button>
        </form>
        <Transition fallback=|| view! { <p class="loading">"Computing the review…"</p> }>
            {move || Suspend::new(async move {
                match review.await {
                    Ok(review) => {
                        let table_csv = match review.quarter {
                            Some((y, q)) => format!("/api/v1/reports/quarter.csv?year={y}&quarter={q}"),
                            None => format!("/api/v1/reports/review.csv?from={}&to={}", review.from, review.to),
                        };
                        view! { <ReviewView review node granularity table_csv /> }.into_any()
                    }
                    Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

fn print() {
    #[cfg(feature = "hydrate")]
    {
        let _ = window().print();
    }
}

/// An element id made of `parts`, safe for `getElementById`.
fn chart_id(parts: &[&str]) -> String {
    parts
        .join("-")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[component]
fn ReviewCharts(
    from: i64,
    to: i64,
    paths: Vec<String>,
    node: RwSignal<String>,
    granularity: RwSignal<String>,
) -> impl IntoView {
    let ChartCluster {
        chosen: cluster,
        clusters,
    } = expect_context();
    let ChartData {
        overview,
        allocation,
        activity_granularity,
        activity,
        tree,
    } = expect_context::<Made>().charts.get((from, to), || {
        let activity_granularity = RwSignal::new("day".to_string());
        ChartData {
            overview: Resource::new(
                move || cluster.get(),
                move |c| usage_series(String::new(), c, from, to, "day".into()),
            ),
            allocation: Resource::new(
                move || (node.get(), granularity.get(), cluster.get()),
                move |(n, g, c)| usage_series(n, c, from, to, g),
            ),
            activity_granularity,
            activity: Resource::new(
                move || activity_granularity.get(),
                move |g| cluster_activity(from, to, g),
            ),
            // The engine's usage ratios over the lookback window, now (the Budget tree's figures).
            tree: Resource::new(|| (), |_| get_tree(String::new())),
        }
    });
    let ratio = move || async move {
        let n = node.get();
        tree.await.ok().map(|nodes| {
            let found = nodes.into_iter().find(|t| t.path == n);
            match found {
                Some(t) => match t.ratio {
                    Some(r) => format!(
                        "Usage ratio of {} over the lookback window: {r:.2} ({:.0} of {:.0} allocated GPU-hours used).",
                        t.name, t.usage_gpu_h, t.allocated_gpu_h
                    ),
                    None => format!("{} has no allocated time in the lookback window.", t.name),
                },
                None => "Pick a program or project to see its usage ratio.".to_string(),
            }
        })
    };
    let error = |e: crate::error::AppError| {
        view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any()
    };
    // "… on west" once a cluster is chosen; the activity charts cover every cluster.
    let on = move |what: &str| match cluster.get() {
        c if c.is_empty() => what.to_string(),
        c => format!("{what} on {c}"),
    };
    let several = move || clusters.get().is_some_and(|l| l.len() > 1);
    view! {
        <div class="charts-filter no-print">
            <ClusterFilter clusters selected=cluster />
        </div>
        <div class="charts">
            <section class="card chart-card chart-small" aria-labelledby="overview-heading">
                <h2 id="overview-heading">{move || on("Cluster occupancy")}</h2>
                <Transition fallback=|| view! { <p class="loading">"Loading the overview…"</p> }>
                    {move || Suspend::new(async move {
                        match overview.await {
                            Ok(series) => {
                                let id = chart_id(&["overview", &cluster.get_untracked(), &from.to_string()]);
                                view! { <OverviewChart series id /> }.into_any()
                            }
                            Err(e) => error(e),
                        }
                    })}
                </Transition>
            </section>
            <section class="card chart-card" aria-labelledby="allocation-heading" id="allocation">
                <div class="chart-head">
                    <h2 id="allocation-heading">{move || on("Allocation vs delivered")}</h2>
                    <div class="filters no-print" role="group" aria-label="Choose what to chart">
                        <label for="chart-node">"Node"</label>
                        <select id="chart-node" prop:value=move || node.get()
                            on:change=move |ev| node.set(event_target_value(&ev))>
                            <option value="">"Whole cluster"</option>
                            {paths.into_iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()}
                        </select>
                        <GranularitySelect id="chart-granularity" value=granularity />
                    </div>
                </div>
                <p class="ratio-note" aria-live="polite">
                    <Transition fallback=|| ()>{move || Suspend::new(ratio())}</Transition>
                </p>
                <Transition fallback=|| view! { <p class="loading">"Loading the chart…"</p> }>
                    {move || Suspend::new(async move {
                        match allocation.await {
                            Ok(series) => {
                                let id = chart_id(&["allocation", &cluster.get_untracked(), &series.node, series.granularity.as_str(), &from.to_string()]);
                                view! { <AllocationChart series id /> }.into_any()
                            }
                            Err(e) => error(e),
                        }
                    })}
                </Transition>
            </section>
            <section class="card chart-card" aria-labelledby="activity-heading">
                <div class="chart-head">
                    <h2 id="activity-heading">{move || if several() { "Cluster activity, every cluster" } else { "Cluster activity" }}</h2>
                    <div class="filters no-print" role="group" aria-label="Choose the activity buckets">
                        <GranularitySelect id="activity-granularity" value=activity_granularity />
                    </div>
                </div>
                <Transition fallback=|| view! { <p class="loading">"Loading the activity…"</p> }>
                    {move || Suspend::new(async move {
                        match activity.await {
                            Ok(a) => {
                                let key = format!("{}-{}", a.granularity, from);
                                view! {
                                    <h3>"Queue depth"</h3>
                                    <ActivityChart activity=a.clone() kind="queue" id=chart_id(&["queue", &key]) />
                                    <h3>"Waits before the first start"</h3>
                                    <ActivityChart activity=a.clone() kind="waits" id=chart_id(&["waits", &key]) />
                                    <h3>"Preemptions by reason"</h3>
                                    <ActivityChart activity=a kind="preemptions" id=chart_id(&["preemptions", &key]) />
                                }.into_any()
                            }
                            Err(e) => error(e),
                        }
                    })}
                </Transition>
            </section>
        </div>
    }
}

/// "Per day / hour / week", labelled, bound to `value`.
#[component]
fn GranularitySelect(id: &'static str, value: RwSignal<String>) -> impl IntoView {
    view! {
        <label for=id>"Per"</label>
        <select id=id prop:value=move || value.get()
            on:change=move |ev| value.set(event_target_value(&ev))>
            <option value="day">"day"</option>
            <option value="hour">"hour"</option>
            <option value="week">"week"</option>
        </select>
    }
}

#[component]
fn ReviewView(
    review: Review,
    node: RwSignal<String>,
    granularity: RwSignal<String>,
    /// Where this table downloads as CSV.
    table_csv: String,
) -> impl IntoView {
    let people_paths: Vec<String> = review.rows.iter().map(|r| r.path.clone()).collect();
    let h = review.headline.clone();
    // The usage CSV is of the cluster the charts below show, if one is chosen.
    let cluster = expect_context::<ChartCluster>().chosen;
    let one = move || Some(cluster.get()).filter(|c| !c.is_empty());
    let csv = format!(
        "/api/v1/reports/usage.csv?from={}&to={}&granularity=day",
        review.from, review.to
    );
    let collapsed = Collapsed::new();
    let has_data = review
        .rows
        .iter()
        .any(|r| r.funded_gpu_h > 0.0 || r.delivered_gpu_h > 0.0);
    view! {
        <section class="headline" aria-label="Headline figures">
            <Figure label="Delivered / owed" value=pct(h.delivered_over_owed) note="reference: 98%" />
            <Figure label="Worst team" value=pct(h.worst_team) note="reference: 90%" />
            <Figure label="Teams at ≥ 95%" value=format!("{} of {}", h.teams_at_95pct, h.teams) note="" />
            <Figure label="Hourly tracking" value=pct(h.hourly) note="owed delivered when owed" />
            <Figure label="Occupancy" value=pct(h.occupancy) note="reference: 98%" />
            <Figure label="Unallocated" value=pct(h.unallocated_fraction) note="of busy time" />
            <Figure label="Debug p90 wait" value=duration_or_dash(h.debug_p90_wait_s) note="reference: 30 s" />
            <Figure label="GPU utilization" value=pct(h.utilization)
                note=if h.utilization.is_some() { format!("of {} GPU-h sampled", gpu_h(h.sampled_gpu_h)) } else { "not sampled".into() } />
        </section>
        {(!review.clusters.is_empty()).then(|| view! {
            <div class="card table-wrap">
                <table class="table">
                    <caption>"Each cluster (the figures above are all of them together)"</caption>
                    <thead>
                        <tr>
                            <th scope="col">"Cluster"</th>
                            <th scope="col" class="num">"Healthy GPU-h"</th>
                            <th scope="col" class="num">"Delivered / owed"</th>
                            <th scope="col" class="num">"Worst team"</th>
                            <th scope="col" class="num">"Hourly tracking"</th>
                            <th scope="col" class="num">"Occupancy"</th>
                            <th scope="col" class="num">"Debug p90 wait"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {review.clusters.iter().map(|c| { let h = &c.headline; view! {
                            <tr>
                                <th scope="row">{c.name.clone()}</th>
                                <td class="num">{gpu_h(h.capacity_gpu_h)}</td>
                                <td class="num">{pct(h.delivered_over_owed)}</td>
                                <td class="num">{pct(h.worst_team)}</td>
                                <td class="num">{pct(h.hourly)}</td>
                                <td class="num">{pct(h.occupancy)}</td>
                                <td class="num">{duration_or_dash(h.debug_p90_wait_s)}</td>
                            </tr>
                        }}).collect_view()}
                    </tbody>
                </table>
            </div>
        })}
        {(!has_data).then(|| view! { <p class="card empty">{format!("No usage was recorded in {}.", review.label)}</p> })}
        {
            let said = shortfalls(&review.rows);
            (!said.is_empty()).then(|| view! {
                <section class="card" aria-labelledby="shortfalls-heading">
                    <h2 id="shortfalls-heading">"Teams that received less than their share, and why"</h2>
                    <ul class="shortfalls">
                        {said.into_iter().map(|(path, why)| view! { <li><strong>{path}</strong>" — "{why}</li> }).collect_view()}
                    </ul>
                </section>
            })
        }
        <ReviewCharts from=review.from to=review.to paths=review.rows.iter().map(|r| r.path.clone()).collect() node granularity />
        <div class="card table-wrap">
            <table class="table tree review">
                <caption>{format!("{}: per program and project. Funded share is the share in force hour by hour over the period (where it changed: from → to); owed is that share of healthy capacity, capped hour by hour by demand.", review.label)}</caption>
                <thead>
                    <tr>
                        <th scope="col">"Node"</th>
                        <th scope="col" class="num">"Funded share"</th>
                        <th scope="col" class="num">"Funded GPU-h"</th>
                        <th scope="col" class="num">"Owed GPU-h"</th>
                        <th scope="col" class="num">"Delivered GPU-h"</th>
                        <th scope="col" class="num">"Delivered / owed"</th>
                        <th scope="col" class="num">"Unallocated GPU-h"</th>
                        <th scope="col" class="num">"Wait p50"</th>
                        <th scope="col" class="num">"Wait p90"</th>
                        <th scope="col" class="num">"GPU utilization"</th>
                    </tr>
                </thead>
                <tbody>
                    {review.rows.into_iter().map(|r| {
                        let path = r.path.clone();
                        let hidden = {
                            let path = path.clone();
                            move || collapsed.hides(&path)
                        };
                        let name = path.rsplit('/').next().unwrap_or(&path).to_string();
                        let ratio_class = match r.delivered_over_owed { Some(x) if x >= 0.95 => "ratio ratio-under", Some(_) => "ratio ratio-over", None => "ratio" };
                        view! {
                            <tr hidden=hidden>
                                <th scope="row" style=format!("padding-left: {}rem", r.depth as f64 * 1.25 - 0.75)>
                                    <TreeToggle collapsed path=path.clone() leaf=r.leaf label=path.clone() />
                                    " "
                                    {
                                        let chart = r.path.clone();
                                        let current = r.path.clone();
                                        view! {
                                            <button type="button" class="link-button"
                                                aria-pressed=move || (node.get() == current).to_string()
                                                aria-controls="allocation"
                                                on:click=move |_| node.set(chart.clone())>
                                                {name}
                                            </button>
                                        }
                                    }
                                </th>
                                <td class="num">
                                    {pct(Some(r.fraction))}
                                    {((r.share_at_start - r.share_at_end).abs() > 1e-9).then(|| view! {
                                        <span class="hint share-change">{format!(" ({} → {})", pct(Some(r.share_at_start)), pct(Some(r.share_at_end)))}</span>
                                    })}
                                </td>
                                <td class="num">{gpu_h(r.funded_gpu_h)}</td>
                                <td class="num">{gpu_h(r.owed_gpu_h)}</td>
                                <td class="num">{gpu_h(r.delivered_gpu_h)}</td>
                                <td class="num"><span class=ratio_class>{pct(r.delivered_over_owed)}</span></td>
                                <td class="num">{gpu_h(r.unallocated_gpu_h)}</td>
                                <td class="num">{duration_or_dash(r.wait_p50_s)}</td>
                                <td class="num">{duration_or_dash(r.wait_p90_s)}</td>
                                <td class="num">{pct(r.utilization)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        <p class="no-print actions">
            <a class="button button-quiet" href=table_csv download=format!("hourglass-{}.csv", review.label.replace(' ', "-"))>"Export this table (CSV)"</a>
            " "
            <a class="button button-quiet"
                href=move || one().map_or(csv.clone(), |c| format!("{csv}&cluster={c}"))
                download=move || one().map_or("hourglass-usage.csv".into(), |c| format!("hourglass-usage-{c}.csv"))>
                {move || one().map_or("Export CSV (per day)".into(), |c| format!("Export CSV of {c} (per day)"))}
            </a>
        </p>
        {review.quarter.map(|(year, quarter)| view! { <QuarterTrend year quarter /> })}
        // Without a tree there is nobody's time to split.
        {(!people_paths.is_empty()).then(|| view! { <People from=review.from to=review.to paths=people_paths /> })}
    }
}

/// `+4.1 pts` / `−2.0 pts` from `before` to `after`, or "—".
fn change(before: Option<f64>, after: Option<f64>) -> String {
    match (before, after) {
        (Some(b), Some(a)) => {
            let pts = (a - b) * 100.0;
            if pts.abs() < 0.05 {
                "no change".into()
            } else {
                format!("{}{:.1} pts", if pts > 0.0 { "+" } else { "−" }, pts.abs())
            }
        }
        _ => "—".into(),
    }
}

/// Each program's and project's delivered / owed over the last quarters up to this one.
#[component]
fn QuarterTrend(year: i32, quarter: u32) -> impl IntoView {
    let trend = expect_context::<Made>().trends.get((year, quarter), || {
        Resource::new(|| (), move |_| quarter_trend(Some(year), Some(quarter)))
    });
    view! {
        <section class="card" aria-labelledby="trend-heading">
            <h2 id="trend-heading">"Quarter over quarter"</h2>
            <Transition fallback=|| view! { <p class="loading">"Comparing the last quarters…"</p> }>
                {move || Suspend::new(async move {
                    match trend.await {
                        Ok(t) if t.quarters.len() < 2 => view! {
                            <p class="empty">"Nothing was recorded before this quarter, so there is no trend yet."</p>
                        }.into_any(),
                        Ok(t) => {
                            let last = t.quarters.len() - 1;
                            view! {
                                <div class="table-wrap">
                                <table class="table compact trend">
                                    <caption>"Delivered / owed per quarter, with the GPU-hours delivered and owed; the last column is the change since the quarter before."</caption>
                                    <thead><tr>
                                        <th scope="col">"Node"</th>
                                        {t.quarters.iter().map(|q| view! { <th scope="col" class="num">{q.label.clone()}</th> }).collect_view()}
                                        <th scope="col" class="num">"Change"</th>
                                    </tr></thead>
                                    <tbody>
                                        <tr class="trend-total">
                                            <th scope="row">"Whole cluster"</th>
                                            {t.quarters.iter().map(|q| view! { <td class="num">{pct(q.delivered_over_owed)}</td> }).collect_view()}
                                            <td class="num">{change(t.quarters[last - 1].delivered_over_owed, t.quarters[last].delivered_over_owed)}</td>
                                        </tr>
                                        {t.rows.into_iter().map(|r| view! {
                                            <tr>
                                                <th scope="row" style=format!("padding-left: {}rem", r.depth as f64 * 1.25 - 0.75)>{r.path.clone()}</th>
                                                {r.cells.iter().map(|c| view! {
                                                    <td class="num">
                                                        {pct(c.delivered_over_owed)}
                                                        <span class="hint">{format!(" ({} / {} GPU-h)", gpu_h(c.delivered_gpu_h), gpu_h(c.owed_gpu_h))}</span>
                                                    </td>
                                                }).collect_view()}
                                                <td class="num">{change(r.cells[last - 1].delivered_over_owed, r.cells[last].delivered_over_owed)}</td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                                </div>
                                <p class="no-print actions">
                                    <a class="button button-quiet" href=format!("/api/v1/reports/trend.csv?year={year}&quarter={quarter}")>"Export the trend (CSV)"</a>
                                </p>
                            }.into_any()
                        }
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// Who used a chosen program's or project's GPUs over the period.
#[component]
fn People(from: i64, to: i64, paths: Vec<String>) -> impl IntoView {
    let first = paths.first().cloned().unwrap_or_default();
    let PeopleData { path, people } = expect_context::<Made>().people.get((from, to), || {
        let path = RwSignal::new(first);
        PeopleData {
            path,
            people: Resource::new(move || path.get(), move |p| people_usage(p, from, to)),
        }
    });
    view! {
        <section class="card" aria-labelledby="people-heading">
            <h2 id="people-heading">"Who used the time"</h2>
            <div class="filters no-print">
                <label for="people-of">"Program or project"</label>
                <select id="people-of" prop:value=move || path.get()
                    on:change=move |ev| path.set(event_target_value(&ev))>
                    {paths.into_iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()}
                </select>
            </div>
            <Transition fallback=|| view! { <p class="loading">"Adding up its runs…"</p> }>
                {move || Suspend::new(async move {
                    match people.await {
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty">{format!("Nobody's work ran under {} in this period.", path.get_untracked())}</p>
                        }.into_any(),
                        Ok(list) => view! {
                            <div class="table-wrap">
                            <table class="table compact">
                                <caption>{format!("Each person's workloads under {} that ran in the period, by GPU-hours within it.", path.get_untracked())}</caption>
                                <thead><tr>
                                    <th scope="col">"Person"</th>
                                    <th scope="col" class="num">"Workloads"</th>
                                    <th scope="col" class="num">"Funded GPU-h"</th>
                                    <th scope="col" class="num">"Free GPU-h"</th>
                                    <th scope="col" class="num">"GPU utilization"</th>
                                </tr></thead>
                                <tbody>
                                    {list.into_iter().map(|p| view! {
                                        <tr>
                                            <th scope="row">{p.username}</th>
                                            <td class="num">{p.workloads}</td>
                                            <td class="num">{gpu_h(p.delivered_gpu_h)}</td>
                                            <td class="num">{gpu_h(p.unallocated_gpu_h)}</td>
                                            <td class="num">{pct(p.utilization)}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                            </div>
                        }.into_any(),
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Figure(label: &'static str, value: String, #[prop(into)] note: String) -> impl IntoView {
    view! {
        <div class="figure">
            <span class="figure-label">{label}</span>
            <span class="figure-value">{value}</span>
            <span class="figure-note">{note}</span>
        </div>
    }
}
