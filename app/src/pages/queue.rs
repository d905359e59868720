//! The global queue in scheduler order, with the metric that sorts it.

use crate::{
    clock::now_s,
    components::cluster_filter::{cluster_from_query, use_clusters, ClusterFilter},
    live::use_live_updates,
    pages::workloads::list::timing,
    workloads::{
        api::queue,
        sentences::{ratio_or_dash, start_estimate, start_estimate_short},
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn QueuePage() -> impl IntoView {
    let live = use_live_updates();
    let all = RwSignal::new(false);
    let cluster = cluster_from_query();
    let clusters = use_clusters();
    let rows = Resource::new(
        move || (live.get(), all.get(), cluster.get()),
        |(_, all, cluster)| queue(all, cluster),
    );
    view! {
        <Title text="Queue" />
        <h1>"Queue"</h1>
        <p class="lede">
            "Waiting workloads in the order the scheduler will consider them: funded work by its project's "
            "fair-share rank (the lower its usage ratio, the earlier), then priority within a project, then "
            "submit time; free work after all funded work, the free work that can resume first. Estimated starts come from running the scheduler "
            "forward over this queue with each project's median run time; later submissions that rank ahead delay them."
        </p>
        <ClusterFilter clusters selected=cluster />
        <Transition fallback=|| view! { <p class="loading">"Loading the queue…"</p> }>
            {move || Suspend::new(async move {
                let now = now_s();
                match rows.await {
                    Ok(view) if view.rows.is_empty() => view! {
                        <section class="card empty"><p>"Nothing is waiting: every submitted workload is running."</p></section>
                    }.into_any(),
                    Ok(view) => {
                        let (shown, total) = (view.rows.len(), view.total);
                        let rows = view.rows;
                        // A cluster column where the list mixes clusters.
                        let several = rows.iter().any(|r| r.workload.cluster != rows[0].workload.cluster);
                        view! {
                        <p class="queue-count" role="status">
                            {if shown < total {
                                format!("Showing the first {shown} of {total} waiting workloads.")
                            } else {
                                format!("{total} waiting workload{}.", if total == 1 { "" } else { "s" })
                            }}
                            " "
                            {(shown < total).then(|| view! {
                                <button type="button" class="button-quiet" on:click=move |_| all.set(true)>"Show all"</button>
                            })}
                        </p>
                        <div class="card table-wrap">
                            <table class="table">
                                <caption class="visually-hidden">"Queue in scheduler order"</caption>
                                <thead>
                                    <tr>
                                        <th scope="col" class="num">"#"</th>
                                        <th scope="col">"Workload"</th>
                                        <th scope="col">"Project"</th>
                                        {several.then(|| view! { <th scope="col">"Cluster"</th> })}
                                        <th scope="col" class="num">"Project rank"</th>
                                        <th scope="col" class="num">"Usage ratio"</th>
                                        <th scope="col">"Kind"</th>
                                        <th scope="col" class="num">"Priority"</th>
                                        <th scope="col" class="num">"GPUs"</th>
                                        <th scope="col">"Waiting"</th>
                                        <th scope="col">"Estimated start"</th>
                                    </tr>
                                </thead>
                                <tbody>
                                    {rows.into_iter().map(|row| {
                                        let w = row.workload;
                                        view! {
                                            <tr>
                                                <td class="num">{row.position}</td>
                                                <td><a href=format!("/workloads/{}", w.id)>{w.name.clone()}</a></td>
                                                <td>{w.project.clone()}</td>
                                                {several.then(|| view! { <td>{w.cluster.clone()}</td> })}
                                                <td class="num">{row.leaf_rank}</td>
                                                <td class="num">
                                                    <span class=ratio_class(row.leaf_ratio)>
                                                        {ratio_or_dash(row.leaf_ratio)}
                                                    </span>
                                                </td>
                                                <td>{if row.allocated { "funded" } else { "free" }}</td>
                                                <td class="num">{w.priority}</td>
                                                <td class="num">{w.gpus}</td>
                                                <td>{timing(&w, now)}</td>
                                                <td title=row.estimated_start.as_ref().map(|e| start_estimate(e, now))>
                                                    {row.estimated_start.as_ref().map(|e| start_estimate_short(e, now)).unwrap_or_else(|| "—".into())}
                                                </td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </div>
                    }.into_any()
                    }
                    Err(error) => view! { <p class="form-error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// Under-served (< 1) or over-served, for a colour cue.
pub fn ratio_class(ratio: Option<f64>) -> &'static str {
    match ratio {
        Some(r) if r < 1.0 => "ratio ratio-under",
        Some(_) => "ratio ratio-over",
        None => "ratio",
    }
}
