//! The "Cluster" menu of lists that can be narrowed to one cluster (Queue, Nodes). Shown only
//! where there is more than one cluster; starts from the page's `?cluster=` query.

use crate::nodes::{api::clusters, ClusterSummary};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The cluster named in the page's URL (`?cluster=`), or all clusters (empty).
pub fn cluster_from_query() -> RwSignal<String> {
    let query = use_query_map();
    RwSignal::new(query.with_untracked(|q| q.get("cluster").unwrap_or_default()))
}

/// The clusters, read once per page.
pub fn use_clusters() -> Resource<Vec<ClusterSummary>> {
    Resource::new(|| (), |_| async { clusters().await.unwrap_or_default() })
}

/// A labelled menu: "All clusters" (empty) or one cluster; nothing while there is one cluster.
/// With `one`, there is no "All clusters": empty stands for the first cluster.
#[component]
pub fn ClusterFilter(
    clusters: Resource<Vec<ClusterSummary>>,
    selected: RwSignal<String>,
    #[prop(optional)] one: bool,
) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let list = clusters.await;
                // With `one`, empty shows the first cluster: the menu says so too (a value that
                // names no option would leave it blank).
                let first = list.first().map(|c| c.name.clone()).unwrap_or_default();
                let shown = move || {
                    let s = selected.get();
                    if one && s.is_empty() { first.clone() } else { s }
                };
                (list.len() > 1).then(|| view! {
                    <div class="inline-field">
                        <label for="cluster-filter">"Cluster"</label>
                        <select
                            id="cluster-filter"
                            name="cluster"
                            prop:value=shown
                            on:change=move |ev| selected.set(event_target_value(&ev))
                        >
                            {(!one).then(|| view! { <option value="">"All clusters"</option> })}
                            {list.into_iter().map(|c| {
                                let label = format!("{} ({} GPUs)", c.name, c.gpus);
                                view! { <option value=c.name>{label}</option> }
                            }).collect_view()}
                        </select>
                    </div>
                })
            })}
        </Suspense>
    }
}
