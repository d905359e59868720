//! Nodes: health, heartbeats, and who holds each GPU; admins register and cordon nodes here.

use crate::{
    clock::now_s,
    components::{
        cluster_filter::{cluster_from_query, use_clusters, ClusterFilter},
        copy::CopyButton,
        field::{FieldError, FormError},
    },
    live::use_live_updates,
    nodes::{
        api::{list_nodes, RegisterNode, RemoveNode, SetNodeState},
        NodeAction, NodeView,
    },
    session::use_current_user,
    workloads::sentences::{duration, moment},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NodesPage() -> impl IntoView {
    let live = use_live_updates();
    let act = ServerAction::<SetNodeState>::new();
    let register = ServerAction::<RegisterNode>::new();
    // The action's error is made here, not in the form below: the action's result reloads
    // the list and replaces it, and the replaced form may still be told of the new value as
    // it goes, when a signal made in it would be gone (see the workload page).
    let register_error = Signal::derive(move || register.value().get().and_then(Result::err));
    let remove = ServerAction::<RemoveNode>::new();
    // Which node's action waits for its "Yes", kept by the page: the list reloads at every live
    // update and replaces the cards, and a question asked in a card would go with it.
    let asking = RwSignal::new(None::<(String, NodeAction)>);
    Effect::new(move |_| {
        act.version().track();
        asking.set(None);
    });
    let nodes = Resource::new(
        move || {
            (
                live.get(),
                act.version().get(),
                register.version().get(),
                remove.version().get(),
            )
        },
        |_| list_nodes(),
    );
    let user = use_current_user();
    let cluster = cluster_from_query();
    let clusters = use_clusters();
    let act_error = Signal::derive(move || {
        act.value()
            .get()
            .and_then(Result::err)
            .or_else(|| remove.value().get().and_then(Result::err))
    });
    view! {
        <Title text="Nodes" />
        <h1>"Nodes"</h1>
        <FormError error=act_error />
        <ClusterFilter clusters selected=cluster />
        <Transition fallback=|| view! { <p class="loading">"Loading nodes…"</p> }>
            {move || Suspend::new(async move {
                let admin = user.await.ok().flatten().is_some_and(|u| u.is_admin());
                let only = cluster.get();
                match nodes.await.map(|list| {
                    list.into_iter().filter(|n| only.is_empty() || n.cluster == only).collect::<Vec<_>>()
                }) {
                    Ok(list) => view! {
                        {list.is_empty().then(|| view! {
                            <section class="card empty"><p>"No GPU nodes are registered yet."</p></section>
                        })}
                        {(!list.is_empty()).then(|| view! { <Totals nodes=list.clone() /> })}
                        <div class="node-grid">
                            {list.into_iter().map(|node| view! { <NodeCard node admin act remove asking /> }).collect_view()}
                        </div>
                        {admin.then(|| view! { <RegisterNodeForm register error=register_error /> })}
                    }.into_any(),
                    Err(error) => view! { <p class="form-error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// "21 of 28 GPUs busy" over the nodes that take work, and what each GPU colour means.
#[component]
fn Totals(nodes: Vec<NodeView>) -> impl IntoView {
    let in_service: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| n.state == crate::nodes::NodeHealth::Healthy)
        .collect();
    let total: usize = in_service.iter().map(|n| n.slots.len()).sum();
    let busy: usize = in_service
        .iter()
        .map(|n| n.slots.iter().filter(|s| s.holder.is_some()).count())
        .sum();
    let out = nodes.len() - in_service.len();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let summary = match (in_service.len(), out) {
        (0, _) => format!(
            "No node takes new work: {} out of service.",
            plural(out, "node", "nodes")
        ),
        (n, 0) => format!(
            "{busy} of {total} GPUs busy on {}.",
            plural(n, "node", "nodes")
        ),
        (n, _) => format!(
            "{busy} of {total} GPUs busy on {}; {} out of service.",
            plural(n, "healthy node", "healthy nodes"),
            plural(out, "node", "nodes")
        ),
    };
    view! {
        <section class="card node-totals" aria-label="Totals">
            <p role="status">{summary}</p>
            <ul class="legend" aria-label="What the GPU colours mean">
                <li><span class="swatch gpu-idle"></span>"idle"</li>
                <li><span class="swatch gpu-protected"></span>"protected (within its minimum runtime)"</li>
                <li><span class="swatch gpu-open"></span>"minimum runtime passed (preemptible by fair share)"</li>
                <li><span class="swatch gpu-free"></span>"free work (interruptible)"</li>
            </ul>
        </section>
    }
}

#[component]
fn NodeCard(
    node: NodeView,
    admin: bool,
    act: ServerAction<SetNodeState>,
    remove: ServerAction<RemoveNode>,
    /// The node and action whose confirmation is open, if any (the page's).
    asking: RwSignal<Option<(String, NodeAction)>>,
) -> impl IntoView {
    let never_connected = node.heartbeat_age_s.is_none();
    let state = node.state;
    let now = now_s();
    let heartbeat = node
        .heartbeat_age_s
        .map(|age| format!("heartbeat {} ago", duration(age)))
        .unwrap_or_else(|| "never connected".into());
    let name = node.name.clone();
    view! {
        <section class="card node" aria-label=format!("Node {}", node.name)>
            <header class="node-head">
                <h2>{node.name.clone()}</h2>
                <span class="badges">
                    <span class=format!("health health-{}", node.state)>{node.state.as_str()}</span>
                    {node.draining.is_some().then(|| view! { " " <span class="health health-draining">"draining"</span> })}
                </span>
            </header>
            <p class="hint">{format!("{} × {} · cluster {} · {}", node.gpus, if node.gpu_model.is_empty() { "GPU" } else { &node.gpu_model }, node.cluster, heartbeat)}</p>
            {node.health_reason.clone().map(|reason| {
                let since = node.unhealthy_since.map(|t| format!(" since {}", moment(t, now))).unwrap_or_default();
                view! {
                    <p class="node-reason" role="note">
                        <strong>{format!("Health check failed{since}: ")}</strong>{reason}
                        " Its workloads drain as their minimum runtimes pass."
                    </p>
                }
            })}
            {node.draining.clone().map(|d| {
                let others = match d.workloads {
                    1 => String::new(),
                    n => format!(" {} workloads are still on it; each stops as its minimum runtime ends.", n),
                };
                view! {
                    <p class="node-reason" role="note" aria-label=format!("Drain of {}", node.name)>
                        <strong>{format!("Draining: empty by {}. ", moment(d.until, now))}</strong>
                        {format!(
                            "The last protected workload to leave is {} ({}, {}'s), at {}; its page tells its owner.{others}",
                            d.last.name, d.last.project, d.last.owner, moment(d.until, now)
                        )}
                    </p>
                }
            })}
            <ul class="gpu-grid" aria-label=format!("GPUs of {}", node.name)>
                {node.slots.iter().map(|slot| {
                    let (class, label, text) = match &slot.holder {
                        None => ("gpu gpu-idle", format!("GPU {}: idle", slot.index), String::new()),
                        Some(h) => {
                            let protected = h.protected_until.filter(|&t| t > now);
                            let (class, how) = match (h.allocated, protected) {
                                (false, _) => ("gpu gpu-free", "free work, interruptible".to_string()),
                                (true, Some(t)) => ("gpu gpu-protected", format!("protected until {}", moment(t, now))),
                                (true, None) => ("gpu gpu-open", "minimum runtime passed".to_string()),
                            };
                            (class, format!("GPU {}: {} ({}), {}", slot.index, h.name, h.project, how), h.name.clone())
                        }
                    };
                    view! { <li class=class title=label.clone() aria-label=label><span class="gpu-index">{slot.index}</span><span class="gpu-holder">{text}</span></li> }
                }).collect_view()}
            </ul>
            {admin.then(|| {
                let group = format!("Actions for {name}");
                // Only what changes something for this node, and each asks first.
                let asked_name = name.clone();
                let asked = move || {
                    asking.with(|a| a.as_ref().filter(|(n, _)| *n == asked_name).map(|&(_, a)| a))
                };
                let buttons = NodeAction::ALL
                    .into_iter()
                    .filter(|a| a.fits(state))
                    .map(|action| {
                        let label = action.label();
                        let aria = format!("{label} {name}");
                        let asked = asked.clone();
                        let node = name.clone();
                        view! {
                            <button type="button" class="button-quiet" aria-label=aria
                                aria-expanded=move || (asked() == Some(action)).to_string()
                                on:click=move |_| asking.set(Some((node.clone(), action)))>{label}</button>
                        }
                    })
                    .collect_view();
                let confirm_name = name.clone();
                let confirm = move || asked().map(|action| {
                    let name = confirm_name.clone();
                    let group = format!("Confirm: {} {name}", action.label());
                    let question = action.question(&name);
                    let yes = format!("Yes, {} {name}", action.label().to_lowercase());
                    view! {
                        <div role="group" aria-label=group class="confirm">
                            <p>{question}</p>
                            <ActionForm action=act>
                                <input type="hidden" name="name" value=name />
                                <input type="hidden" name="action" value=action.as_str() />
                                <button type="submit" class="button">{yes}</button>
                            </ActionForm>
                            <button type="button" class="button-quiet" on:click=move |_| asking.set(None)>"Keep it as it is"</button>
                        </div>
                    }
                });
                // A node whose agent never connected was perhaps registered by mistake.
                let removal = never_connected.then(|| {
                    let aria = format!("Remove {name}");
                    let name = name.clone();
                    view! {
                        <ActionForm action=remove>
                            <input type="hidden" name="name" value=name />
                            <button type="submit" class="button-quiet danger" aria-label=aria>"Remove"</button>
                        </ActionForm>
                    }
                });
                view! {
                    <div class="node-actions" role="group" aria-label=group>{buttons}{removal}</div>
                    {confirm}
                }
            })}
        </section>
    }
}

#[component]
fn RegisterNodeForm(
    register: ServerAction<RegisterNode>,
    /// The action's error (made by the page, which outlives this form).
    error: Signal<Option<crate::error::AppError>>,
) -> impl IntoView {
    let registered = move || register.value().get().and_then(Result::ok);
    view! {
        <section class="card">
            <h2>"Register a node"</h2>
            <ActionForm action=register attr:class="stack">
                <FormError error />
                <label for="node-name">"Node name"</label>
                <input id="node-name" name="name" type="text" required />
                <FieldError id="node-name-error" field="name" error />
                <label for="node-cluster">"Cluster"</label>
                <input id="node-cluster" name="cluster" type="text" placeholder="default" aria-describedby="node-cluster-hint" />
                <p id="node-cluster-hint" class="hint">"A named pool of nodes; a new name creates it. Leave blank for the default cluster."</p>
                <FieldError id="node-cluster-error" field="cluster" error />
                <button type="submit" class="button">"Register"</button>
            </ActionForm>
            {move || registered().map(|node| {
                let command = format!("hourglass agent --server {} --name {} --cluster {} --gpus auto --token {}", server_url(), node.name, node.cluster, node.token);
                view! {
                    <div class="secret" role="status">
                        <p>{format!("Node {} is registered. Run this on it (the token is shown only once):", node.name)}</p>
                        <pre>{command.clone()}</pre>
                        <CopyButton text=command label="Copy the agent command" />
                    </div>
                }
            })}
        </section>
    }
}

fn server_url() -> String {
    #[cfg(feature = "hydrate")]
    {
        window().location().origin().unwrap_or_default()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        "URL".to_string()
    }
}
