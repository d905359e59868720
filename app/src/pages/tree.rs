//! The budget tree: every node's share, effective fraction, owners and usage ratio; owners and
//! members propose rebalancing here.

use crate::components::cluster_filter::{cluster_from_query, use_clusters, ClusterFilter};
use crate::{
    budget::{api::get_tree, api::ProposeChange, ChildShare, ProposalInput, TreeNodeView},
    clock::now_s,
    components::chart::{AllocationChart, ChartScript},
    components::tree_toggle::{Collapsed, TreeToggle},
    pages::queue::ratio_class,
    reports::api::usage_series,
};
use leptos::prelude::*;
use leptos_meta::Title;
use std::collections::BTreeSet;

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

#[component]
pub fn TreePage() -> impl IntoView {
    let propose = ServerAction::<ProposeChange>::new();
    // The tree reloads when a proposal is accepted, not after a refusal: reloading re-creates the
    // editor, which would lose what was typed.
    let accepted = Memo::new(move |last: Option<&Option<i64>>| {
        propose
            .value()
            .get()
            .and_then(Result::ok)
            .map(|r| r.id)
            .or_else(|| last.cloned().flatten())
    });
    // The people panel's node, and a count of its accepted changes (owners show in the tree).
    let (people_of, set_people_of) = signal(None::<String>);
    let (people_changed, set_people_changed) = signal(0u32);
    // The share-history panel's node.
    let (shares_of, set_shares_of) = signal(None::<String>);
    let cluster = cluster_from_query();
    let clusters = use_clusters();
    let tree = Resource::new(
        move || (accepted.get(), people_changed.get(), cluster.get()),
        |(_, _, cluster)| get_tree(cluster),
    );
    let collapsed = Collapsed::new();
    let (editing, set_editing) = signal(None::<String>);
    let submitted = NodeRef::<leptos::html::P>::new();
    Effect::new(move |_| {
        if matches!(propose.value().get(), Some(Ok(_))) {
            if let Some(notice) = submitted.get() {
                notice.scroll_into_view();
            }
        }
    });
    view! {
        <Title text="Budget tree" />
        <ChartScript />
        <h1>"Budget tree"</h1>
        <p class="lede">
            "Each node's share is its weight among its siblings; its effective share of the cluster is the product "
            "along its path. The usage ratio compares GPU time used with GPU time funded over the lookback window: "
            "below 1 is under-served (its work goes first), above 1 over-served. GPU utilization is how much of "
            "the GPUs its work held it actually used, as the agents sampled them over the same window."
        </p>
        // Where the tree's top is, so the outcome of a proposal is seen where the page starts.
        <p class="notice" role="status" node_ref=submitted hidden=move || !matches!(propose.value().get(), Some(Ok(_)))>
            {move || propose.value().get().and_then(Result::ok).map(|r| view! {
                {format!("Change request #{} for {} submitted; it awaits an owner's decision. ", r.id, if r.node.is_empty() { "the cluster" } else { &r.node })}
                <a href=format!("/approvals?request={}", r.id)>{format!("Open request #{}", r.id)}</a>
            })}
        </p>
        <ClusterFilter clusters selected=cluster one=true />
        <Transition fallback=|| view! { <p class="loading">"Loading the tree…"</p> }>
            {move || Suspend::new(async move {
                match tree.await {
                    Ok(nodes) if nodes.is_empty() => view! {
                        <section class="card empty"><p>"No budget tree yet. An admin imports one with "<code>"hourglass admin import-tree"</code>"."</p></section>
                    }.into_any(),
                    Ok(nodes) => {
                        let for_editor = nodes.clone();
                        let names: Vec<String> = clusters.await.into_iter().map(|c| c.name).collect();
                        // The shares shown are the chosen cluster's: a change made from them may be
                        // for that cluster alone.
                        let shown = Some(cluster.get_untracked()).filter(|c| !c.is_empty())
                            .or_else(|| names.first().cloned()).unwrap_or_default();
                        let chart_cluster = if names.len() > 1 { shown.clone() } else { String::new() };
                        let clusters_for_editor = if names.len() > 1 { vec![shown] } else { Vec::new() };
                        let paths: Vec<String> = nodes.iter().map(|n| n.path.clone()).filter(|p| !p.is_empty()).collect();
                        view! {
                            <div class="card table-wrap">
                                <table class="table tree">
                                    <caption class="visually-hidden">"Budget tree"</caption>
                                    <thead>
                                        <tr>
                                            <th scope="col">"Node"</th>
                                            <th scope="col" class="num">"Share of parent"</th>
                                            <th scope="col" class="num">"Of the cluster"</th>
                                            <th scope="col">"Owners"</th>
                                            <th scope="col" class="num">"Usage ratio"</th>
                                            <th scope="col" class="num">"GPU utilization"</th>
                                            <th scope="col"><span class="visually-hidden">"Actions"</span></th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {nodes.into_iter().map(|node| view! { <TreeRow node collapsed set_editing set_people_of set_shares_of /> }).collect_view()}
                                    </tbody>
                                </table>
                            </div>
                            <RecentUsage paths cluster=chart_cluster />
                            {move || editing.get().and_then(|path| {
                                let node = for_editor.iter().find(|n| n.path == path)?.clone();
                                let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
                                let below: Vec<TreeNodeView> = for_editor.iter()
                                    .filter(|n| !n.path.is_empty() && n.path.starts_with(&prefix) && n.path != path)
                                    .cloned().collect();
                                let clusters = clusters_for_editor.clone();
                                Some(view! { <ShareEditor node below propose set_editing clusters /> })
                            })}
                        }.into_any()
                    }
                    Err(error) => view! { <p class="form-error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
        {move || people_of.get().map(|path| view! {
            <crate::pages::tree_people::PeoplePanel path close=set_people_of changed=set_people_changed />
        })}
        {move || shares_of.get().map(|path| view! {
            <crate::pages::tree_shares::SharePanel path close=set_shares_of />
        })}
    }
}

/// Allocation vs delivered over the last two weeks for a chosen node, on the cluster whose shares
/// the page shows (empty: the lab's one cluster).
#[component]
fn RecentUsage(paths: Vec<String>, cluster: String) -> impl IntoView {
    const DAYS: i64 = 14;
    let node = RwSignal::new(String::new());
    // Whole days, so the server's and the browser's clocks agree on the period.
    let to = (now_s().div_euclid(86_400) + 1) * 86_400;
    let from = to - DAYS * 86_400;
    let heading = if cluster.is_empty() {
        "Allocation vs delivered, last two weeks".to_string()
    } else {
        format!("Allocation vs delivered on {cluster}, last two weeks")
    };
    let series = Resource::new(
        move || node.get(),
        move |n| usage_series(n, cluster.clone(), from, to, "day".into()),
    );
    view! {
        <section class="card chart-card" aria-labelledby="recent-usage-heading">
            <div class="chart-head">
                <h2 id="recent-usage-heading">{heading}</h2>
                <div class="filters" role="group" aria-label="Choose what to chart">
                    <label for="recent-usage-node">"Node"</label>
                    <select id="recent-usage-node" on:change=move |ev| node.set(event_target_value(&ev))>
                        <option value="">"Whole cluster"</option>
                        {paths.into_iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()}
                    </select>
                </div>
            </div>
            <Transition fallback=|| view! { <p class="loading">"Loading the chart…"</p> }>
                {move || Suspend::new(async move {
                    match series.await {
                        Ok(series) => {
                            let id: String = format!("recent-usage-{}", series.node)
                                .chars()
                                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                                .collect();
                            view! { <AllocationChart series id /> }.into_any()
                        }
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn TreeRow(
    node: TreeNodeView,
    collapsed: Collapsed,
    set_editing: WriteSignal<Option<String>>,
    set_people_of: WriteSignal<Option<String>>,
    set_shares_of: WriteSignal<Option<String>>,
) -> impl IntoView {
    let path = node.path.clone();
    let people_path = path.clone();
    let shares_path = path.clone();
    let hidden = {
        let path = path.clone();
        move || collapsed.hides(&path)
    };
    let label = if node.path.is_empty() {
        "cluster".to_string()
    } else {
        node.path.clone()
    };
    let edit_path = path.clone();
    view! {
        <tr hidden=hidden class:leaf=node.leaf>
            <th scope="row" style=format!("padding-left: {}rem", 0.5 + node.depth as f64 * 1.25)>
                <TreeToggle collapsed path=path.clone() leaf=node.leaf label />
                " " {node.name.clone()}
            </th>
            <td class="num">{if node.path.is_empty() { "—".to_string() } else { percent(node.of_parent) }}</td>
            <td class="num">{percent(node.fraction)}</td>
            <td>{node.owners.join(", ")}</td>
            <td class="num">
                <span class=ratio_class(node.ratio)>{crate::workloads::sentences::ratio_or_dash(node.ratio)}</span>
                {node.ratio.map(|r| view! { <span class="visually-hidden">{if r < 1.0 { " (under-served)" } else { " (over-served)" }}</span> })}
            </td>
            <td class="num" title=format!("Of the {:.0} GPU-hours used over the lookback window, as the agents sampled them", node.usage_gpu_h)>
                {crate::pages::reports::pct(node.utilization)}
            </td>
            <td class="actions">
                <button type="button" class="button-quiet"
                    aria-label=format!("People of {}", if people_path.is_empty() { "the cluster" } else { &people_path })
                    on:click=move |_| set_people_of.set(Some(people_path.clone()))>
                    "People"
                </button>
                {(!shares_path.is_empty()).then(|| view! {
                    <button type="button" class="button-quiet"
                        aria-label=format!("Share history of {shares_path}")
                        on:click=move |_| set_shares_of.set(Some(shares_path.clone()))>
                        "History"
                    </button>
                })}
                {node.can_propose.then(|| view! {
                    <button type="button" class="button-quiet"
                        aria-label=format!("Propose a change to {}", if edit_path.is_empty() { "the cluster".to_string() } else { edit_path.clone() })
                        on:click=move |_| set_editing.set(Some(edit_path.clone()))>
                        "Propose change"
                    </button>
                })}
            </td>
        </tr>
    }
}

/// One editable child row.
#[derive(Clone, Copy)]
struct Row {
    original: Option<StoredValue<String>>,
    name: RwSignal<String>,
    share: RwSignal<String>,
    removed: RwSignal<bool>,
}

#[component]
fn ShareEditor(
    node: TreeNodeView,
    below: Vec<TreeNodeView>,
    propose: ServerAction<ProposeChange>,
    set_editing: WriteSignal<Option<String>>,
    /// The cluster whose shares are shown, when there are several: the change may be for it alone.
    clusters: Vec<String>,
) -> impl IntoView {
    let applies_to = RwSignal::new(String::new());
    let prefix = if node.path.is_empty() {
        String::new()
    } else {
        format!("{}/", node.path)
    };
    let depth = node.depth + 1;
    let children: Vec<TreeNodeView> = below.iter().filter(|n| n.depth == depth).cloned().collect();
    // Where the shown cluster overrides these children's shares, a change for every cluster
    // starts from the tree's own shares and one for that cluster alone from its: switching
    // "Applies to" puts the matching ones in the fields.
    let tree_share = |c: &TreeNodeView| c.tree_share.unwrap_or(c.share);
    let overridden = children
        .iter()
        .any(|c| (tree_share(c) - c.share).abs() > 1e-12);
    let rows = RwSignal::new(
        children
            .iter()
            .map(|c| Row {
                original: Some(StoredValue::new(c.name.clone())),
                name: RwSignal::new(c.name.clone()),
                share: RwSignal::new(format!("{}", tree_share(c))),
                removed: RwSignal::new(false),
            })
            .collect::<Vec<_>>(),
    );
    // The children as the page showed them: their shares here and the tree's, their fractions.
    let known = StoredValue::new(children);
    if overridden {
        Effect::new(move |first: Option<()>| {
            let every = applies_to.with(String::is_empty);
            if first.is_some() {
                for row in rows.get_untracked() {
                    let Some(original) = row.original.map(|o| o.get_value()) else {
                        continue;
                    };
                    known.with_value(|known| {
                        if let Some(c) = known.iter().find(|c| c.name == original) {
                            row.share
                                .set(format!("{}", if every { tree_share(c) } else { c.share }));
                        }
                    });
                }
            }
        });
    }
    let justification = RwSignal::new(String::new());
    // Problems are shown once the person tries to submit, not while they type.
    let attempted = RwSignal::new(false);
    let effective = RwSignal::new(String::new());
    let node_fraction = node.fraction;
    let total = move || {
        rows.with(|rows| {
            rows.iter()
                .filter(|r| !r.removed.get())
                .map(|r| r.share.get().trim().parse::<f64>().unwrap_or(0.0).max(0.0))
                .sum::<f64>()
        })
    };
    // A share that is not a number of 0 or more is said at once, not only on submit: the preview
    // cannot show it (it would read as 0%).
    let share_problem = move || -> Option<String> {
        rows.get()
            .into_iter()
            .filter(|r| !r.removed.get())
            .find(|r| !valid_share(&r.share.get()))
            .map(|r| {
                format!(
                    "The share of \"{}\" must be a number, 0 or more (not \"{}\").",
                    r.name.get().trim(),
                    r.share.get().trim()
                )
            })
    };
    let problem = move || -> Option<String> {
        let live: Vec<Row> = rows
            .get()
            .into_iter()
            .filter(|r| !r.removed.get())
            .collect();
        if live.is_empty() {
            return Some("Keep at least one child.".into());
        }
        let mut names = BTreeSet::new();
        for r in &live {
            let name = r.name.get();
            let name = name.trim();
            if name.is_empty() {
                return Some("Every child needs a name.".into());
            }
            if !name.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')
            }) {
                return Some(format!(
                    "\"{name}\": use lowercase letters, digits, '-', '_' and '.'."
                ));
            }
            if !names.insert(name.to_string()) {
                return Some(format!("Two children are named \"{name}\"."));
            }
            if !valid_share(&r.share.get()) {
                return share_problem();
            }
        }
        if total() <= 0.0 {
            return Some("At least one share must be above 0.".into());
        }
        if justification.get().trim().is_empty() {
            return Some("Add a justification: it is how the owner decides.".into());
        }
        None
    };
    let old_fraction = move |name: &str| {
        known.with_value(|c| c.iter().find(|c| c.name == name).map(|c| c.fraction))
    };
    let leaves: Vec<TreeNodeView> = below.iter().filter(|n| n.leaf).cloned().collect();
    let server_error = move || {
        propose
            .value()
            .get()
            .and_then(Result::err)
            .map(|e| e.to_string())
    };
    let submit_prefix = prefix.clone();
    let node_path = node.path.clone();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        attempted.set(true);
        if problem().is_some() {
            return;
        }
        let children = rows
            .get()
            .into_iter()
            .filter(|r| !r.removed.get())
            .map(|r| {
                let name = r.name.get().trim().to_string();
                let original = r.original.map(|o| o.get_value());
                let path = format!(
                    "{submit_prefix}{}",
                    original.clone().unwrap_or_else(|| name.clone())
                );
                ChildShare {
                    path,
                    share: r.share.get().trim().parse().unwrap_or(0.0),
                    new_name: original.filter(|o| *o != name).map(|_| name),
                }
            })
            .collect();
        propose.dispatch(ProposeChange {
            input: ProposalInput {
                node: node_path.clone(),
                children,
                justification: justification.get(),
                effective_date: effective.get(),
                cluster: applies_to.get(),
            },
        });
    };
    Effect::new(move |_| {
        if matches!(propose.value().get(), Some(Ok(_))) {
            set_editing.set(None);
        }
    });
    // The editor opens below the tree and its chart: bring it into view, first share at hand.
    let section = NodeRef::<leptos::html::Section>::new();
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(section) = section.get() {
            use wasm_bindgen::JsCast;
            section.scroll_into_view();
            if let Ok(Some(first)) = section.query_selector(".share-input") {
                if let Ok(input) = first.dyn_into::<web_sys::HtmlElement>() {
                    let _ = input.focus();
                }
            }
        }
    });
    let indexed = move || {
        rows.get()
            .into_iter()
            .enumerate()
            .collect::<Vec<(usize, Row)>>()
    };
    let title = if node.path.is_empty() {
        "Rebalance the cluster's programs".to_string()
    } else {
        format!("Rebalance {}", node.path)
    };
    view! {
        <section class="card editor" aria-labelledby="editor-title" node_ref=section>
            <h2 id="editor-title">{title}</h2>
            <form on:submit=submit class="stack">
                <table class="table compact">
                    <thead>
                        <tr>
                            <th scope="col">"Child"</th>
                            <th scope="col">"Share"</th>
                            <th scope="col" class="num">"Of parent"</th>
                            <th scope="col" class="num">"Cluster before"</th>
                            <th scope="col" class="num">"Cluster after"</th>
                            <th scope="col">"Remove"</th>
                        </tr>
                    </thead>
                    <tbody>
                        <For each=indexed key=|(i, _)| *i let:item>
                            {
                                let (i, row) = item;
                                let share_id = format!("share-{i}");
                                let name_id = format!("child-{i}");
                                let of_parent = move || {
                                    let t = total();
                                    let s = row.share.get().trim().parse::<f64>().unwrap_or(0.0).max(0.0);
                                    if row.removed.get() || t <= 0.0 { 0.0 } else { s / t }
                                };
                                let before = row.original.and_then(|o| old_fraction(&o.get_value()));
                                view! {
                                    <tr class:muted=move || row.removed.get()>
                                        <td>
                                            <label class="visually-hidden" for=name_id.clone()>{format!("Name of child {}", i + 1)}</label>
                                            <input id=name_id type="text" prop:value=move || row.name.get()
                                                on:input=move |ev| row.name.set(event_target_value(&ev)) />
                                        </td>
                                        <td>
                                            <label class="visually-hidden" for=share_id.clone()>{move || format!("Share of {}", row.name.get())}</label>
                                            <input id=share_id type="number" min="0" step="any" class="share-input"
                                                prop:value=move || row.share.get()
                                                on:input=move |ev| row.share.set(event_target_value(&ev)) />
                                        </td>
                                        <td class="num">{move || if valid_share(&row.share.get()) { percent(of_parent()) } else { "—".into() }}</td>
                                        <td class="num">{before.map(percent).unwrap_or_else(|| "new".into())}</td>
                                        <td class="num">{move || if valid_share(&row.share.get()) { percent(of_parent() * node_fraction) } else { "—".into() }}</td>
                                        <td>
                                            <input type="checkbox" aria-label=move || format!("Remove {}", row.name.get())
                                                prop:checked=move || row.removed.get()
                                                on:change=move |ev| row.removed.set(event_target_checked(&ev)) />
                                        </td>
                                    </tr>
                                }
                            }
                        </For>
                    </tbody>
                </table>
                <p class="hint">{move || format!("Shares total {} → percentages always sum to 100%.", total())}</p>
                <button type="button" class="button-quiet" on:click=move |_| rows.update(|r| r.push(Row {
                    original: None,
                    name: RwSignal::new(String::new()),
                    share: RwSignal::new("1".into()),
                    removed: RwSignal::new(false),
                }))>"Add a child"</button>
                {(!leaves.is_empty()).then(|| view! {
                    <details>
                        <summary>"Effect on every leaf below"</summary>
                        <table class="table compact">
                            <thead><tr><th scope="col">"Leaf"</th><th scope="col" class="num">"Before"</th><th scope="col" class="num">"After"</th></tr></thead>
                            <tbody>
                                {leaves.iter().map(|leaf| {
                                    let child_name = leaf.path.strip_prefix(&prefix).unwrap_or("").split('/').next().unwrap_or("").to_string();
                                    let before = leaf.fraction;
                                    let child_before = old_fraction(&child_name).unwrap_or(0.0);
                                    let after = move || {
                                        let t = total();
                                        let row = rows.get().into_iter().find(|r| r.original.map(|o| o.get_value()) == Some(child_name.clone()));
                                        match row {
                                            Some(r) if !r.removed.get() && t > 0.0 && child_before > 0.0 => {
                                                let s = r.share.get().trim().parse::<f64>().unwrap_or(0.0).max(0.0);
                                                before * (s / t * node_fraction) / child_before
                                            }
                                            _ => 0.0,
                                        }
                                    };
                                    view! { <tr><td>{leaf.path.clone()}</td><td class="num">{percent(before)}</td><td class="num">{move || percent(after())}</td></tr> }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </details>
                })}
                {(!clusters.is_empty()).then(|| view! {
                    <label for="applies-to">"Applies to"</label>
                    <select id="applies-to" aria-describedby="applies-to-hint"
                        on:change=move |ev| applies_to.set(event_target_value(&ev))>
                        <option value="" selected=true>"Every cluster"</option>
                        {clusters.iter().map(|c| view! { <option value=c.clone()>{format!("Only {c}")}</option> }).collect_view()}
                    </select>
                    <p id="applies-to-hint" class="hint">"A change for one cluster only sets shares there (adding, renaming or removing nodes is for every cluster); a later change for every cluster replaces it."</p>
                    {overridden.then(|| view! {
                        <p class="hint">{format!(
                            "{} has shares of its own for these children, approved for it alone: \"Every cluster\" starts from the tree's shares, \"Only {}\" from its own.",
                            clusters.first().cloned().unwrap_or_default(),
                            clusters.first().cloned().unwrap_or_default(),
                        )}</p>
                    })}
                })}
                <label for="justification">"Justification"</label>
                <textarea id="justification" rows="3" prop:value=move || justification.get()
                    on:input=move |ev| justification.set(event_target_value(&ev))></textarea>
                <label for="effective-date">"Effective date (optional)"</label>
                <input id="effective-date" type="date" prop:value=move || effective.get()
                    on:input=move |ev| effective.set(event_target_value(&ev)) />
                <p class="hint">"Leave empty to apply on approval, or pick a date such as the start of next quarter."</p>
                <p class="form-error" role="alert" hidden=move || (!attempted.get() || problem().is_none()) && share_problem().is_none() && server_error().is_none()>
                    {move || attempted.get().then(problem).flatten().or_else(share_problem).or_else(server_error)}
                </p>
                <div class="row">
                    <button type="submit" class="button" disabled=move || propose.pending().get()>"Submit for approval"</button>
                    <button type="button" class="button-quiet" on:click=move |_| set_editing.set(None)>"Close"</button>
                </div>
            </form>
        </section>
    }
}

/// A share as typed is a finite number, 0 or more.
fn valid_share(typed: &str) -> bool {
    matches!(typed.trim().parse::<f64>(), Ok(s) if s.is_finite() && s >= 0.0)
}
