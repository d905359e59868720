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
                (list.len() > 1).then(|| view! {
                    <label class="inline-field">
                        "Cluster "
                        <select
                            name="cluster"
                            prop:value=move || selected.get()
                            on:change=move |ev| selected.set(event_target_value(&ev))
                        >
                            {(!one).then(|| view! { <option value="">"All clusters"</option> })}
                            {list.into_iter().map(|c| {
                                let label = format!("{} ({} GPUs)", c.name, c.gpus);
                                view! { <option value=c.name>{label}</option> }
                            }).collect_view()}
                        </select>
                    </label>
                })
            })}
        </Suspense>
    }
}
