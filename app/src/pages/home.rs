//! The landing page after sign-in: what each role comes to look at first. Researchers see their
//! workloads and their projects' standing; owners, the approvals waiting for them and how their
//! subtree is served; leadership, this quarter's headline; admins, the nodes needing attention.
//! Each card reads the same server functions as its full page (and is authorized the same way).

use crate::{
    budget::api::{get_tree, list_change_requests},
    model::Role,
    nodes::{
        api::{clusters, list_nodes},
        NodeHealth,
    },
    pages::reports::pct,
    reports::api::quarterly_review,
    session::use_current_user,
    workloads::{
        api::{list_workloads, submit_choices},
        sentences::duration_or_dash,
        WorkloadState,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

/// The tree's standings on each cluster in use, by name (one unnamed entry while there is one).
type Standings = Vec<(String, Vec<crate::budget::TreeNodeView>)>;
type TreeResource = Resource<Result<Standings, crate::error::AppError>>;

/// Every cluster's standings: each keeps its own ledger, so a node's ratio and share differ by
/// cluster. With one cluster, its standings alone, unnamed.
async fn standings_by_cluster() -> Result<Standings, crate::error::AppError> {
    let names: Vec<String> = clusters().await?.into_iter().map(|c| c.name).collect();
    if names.len() < 2 {
        return Ok(vec![(String::new(), get_tree(String::new()).await?)]);
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let tree = get_tree(name.clone()).await?;
        out.push((name, tree));
    }
    Ok(out)
}

/// A column's heading: `what` alone with one cluster, else `what` on that cluster.
fn on_cluster(what: &str, cluster: &str) -> String {
    if cluster.is_empty() {
        what.to_string()
    } else {
        format!("{what} on {cluster}")
    }
}

#[component]
pub fn HomePage() -> impl IntoView {
    let user = use_current_user();
    // One read of the tree per cluster (its ratios cost a snapshot of the scheduler) for every
    // card.
    let tree: TreeResource = Resource::new(|| (), |_| standings_by_cluster());
    view! {
        <Title text="Overview" />
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                user.await.ok().flatten().map(|user| {
                    let role = user.role;
                    view! {
                        <section class="hero">
                            <h1>{format!("Welcome, {}", user.username)}</h1>
                            <p class="lede">
                                "Hourglass funds programs, projects and researchers with shares of GPU time, "
                                "and schedules their workloads so that each receives what it was funded for "
                                "over a sliding week while the GPUs stay busy."
                            </p>
                        </section>
                        <div class="overview">
                            {(role == Role::Researcher).then(|| view! {
                                <MyWorkloads />
                                <MyProjects tree />
                            })}
                            <Owned username=user.username.clone() tree />
                            {(role != Role::Researcher).then(|| view! { <QuarterCard /> })}
                            {(role == Role::Admin).then(|| view! { <NodesCard /> })}
                            <section class="card">
                                <h2>"Your account"</h2>
                                <dl class="facts">
                                    <dt>"Signed in as"</dt>
                                    <dd>{user.username.clone()}</dd>
                                    <dt>"Role"</dt>
                                    <dd>{role.label()}</dd>
                                    <dt>"What you can do"</dt>
                                    <dd>{role_summary(role)}</dd>
                                </dl>
                                {(role == Role::Admin).then(|| view! {
                                    <p><a class="button" href="/users">"Manage users"</a></p>
                                })}
                            </section>
                        </div>
                    }
                })
            })}
        </Suspense>
    }
}

fn role_summary(role: Role) -> &'static str {
    match role {
        Role::Researcher => {
            "Submit workloads to the projects you belong to and follow why each one waits or runs."
        }
        Role::Leadership => "Review funded versus delivered GPU time across programs and quarters.",
        Role::Admin => "Manage users and GPU nodes, and tune the scheduler's settings.",
    }
}

/// `0.83 (under-served)`.
fn standing(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r < 1.0 => format!("{r:.2} (under-served)"),
        Some(r) => format!("{r:.2} (over-served)"),
        None => "— (nothing funded)".to_string(),
    }
}

/// One overview card: a titled section its heading labels.
#[component]
fn Card(id: &'static str, title: &'static str, children: Children) -> impl IntoView {
    view! {
        <section class="card" aria-labelledby=id>
            <h2 id=id>{title}</h2>
            {children()}
        </section>
    }
}

#[component]
fn MyWorkloads() -> impl IntoView {
    let mine = Resource::new(|| (), |_| list_workloads(true, None));
    view! {
        <Card id="overview-workloads" title="Your workloads">
            <Suspense fallback=|| view! { <p class="loading">"Loading your workloads…"</p> }>
                {move || Suspend::new(async move {
                    match mine.await {
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty">"You have not submitted anything yet."</p>
                        }.into_any(),
                        Ok(list) => {
                            let count = |s: WorkloadState| list.iter().filter(|w| w.state == s).count();
                            let (running, queued) = (count(WorkloadState::Running), count(WorkloadState::Queued));
                            let recent: Vec<_> = list.iter().take(5).cloned().collect();
                            let idle: Vec<_> = list.iter().filter(|w| w.squatting()).cloned().collect();
                            view! {
                                <p>{format!("{running} running, {queued} waiting.")}</p>
                                {(!idle.is_empty()).then(|| view! {
                                    <div class="callout" role="status">
                                        <p>"These hold GPUs they have barely used (under 5%) for over an hour; others may be waiting for them:"</p>
                                        <ul class="plain">
                                            {idle.into_iter().map(|w| view! {
                                                <li><a href=format!("/workloads/{}", w.id)>{w.name}</a>{format!(" · {} GPU{}", w.gpus, if w.gpus == 1 { "" } else { "s" })}</li>
                                            }).collect_view()}
                                        </ul>
                                    </div>
                                })}
                                <ul class="plain">
                                    {recent.into_iter().map(|w| view! {
                                        <li>
                                            <a href=format!("/workloads/{}", w.id)>{w.name}</a>
                                            " "<span class=format!("state state-{}", w.state.as_str())>{w.state.as_str()}</span>
                                            <span class="hint">{format!(" · {} · {} GPU{}", w.project, w.gpus, if w.gpus == 1 { "" } else { "s" })}</span>
                                        </li>
                                    }).collect_view()}
                                </ul>
                            }.into_any()
                        }
                    }
                })}
            </Suspense>
            <p class="actions">
                <a class="button" href="/workloads/new">"Submit a workload"</a>
                " "
                <a class="button button-quiet" href="/workloads">"All your workloads"</a>
            </p>
        </Card>
    }
}

#[component]
fn MyProjects(tree: TreeResource) -> impl IntoView {
    let standings = Resource::new(
        || (),
        move |_| async move {
            let projects = submit_choices().await?.projects;
            let tree = tree.await?;
            let names: Vec<String> = tree.iter().map(|(c, _)| c.clone()).collect();
            let rows = projects
                .into_iter()
                .map(|p| {
                    let ratios = tree
                        .iter()
                        .map(|(_, nodes)| nodes.iter().find(|n| n.path == p).and_then(|n| n.ratio))
                        .collect::<Vec<_>>();
                    (p, ratios)
                })
                .collect::<Vec<_>>();
            Ok::<_, crate::error::AppError>((names, rows))
        },
    );
    view! {
        <Card id="overview-projects" title="Your projects">
            <Suspense fallback=|| view! { <p class="loading">"Loading your projects…"</p> }>
                {move || Suspend::new(async move {
                    match standings.await {
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        Ok((_, rows)) if rows.is_empty() => view! {
                            <p class="empty">"You are not a member of any project yet: ask a project's owner to add you."</p>
                        }.into_any(),
                        Ok((names, rows)) => view! {
                            <table class="table compact">
                                <caption>"Usage ratio over the lookback window (each cluster keeps its own): below 1, the project has had less than its share and its work goes first."</caption>
                                <thead><tr>
                                    <th scope="col">"Project"</th>
                                    {names.iter().map(|c| view! { <th scope="col" class="num">{on_cluster("Ratio", c)}</th> }).collect_view()}
                                </tr></thead>
                                <tbody>
                                    {rows.into_iter().map(|(p, ratios)| view! {
                                        <tr>
                                            <th scope="row">{p}</th>
                                            {ratios.into_iter().map(|r| view! { <td class="num">{standing(r)}</td> }).collect_view()}
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </Card>
    }
}

/// For owners (of any role): the approvals waiting for them and how what they own is served.
/// Shows nothing to someone who owns nothing.
#[component]
fn Owned(username: String, tree: TreeResource) -> impl IntoView {
    let data = Resource::new(
        || (),
        move |_| async move {
            let tree = tree.await?;
            let awaiting = list_change_requests("awaiting".into(), None).await?;
            Ok::<_, crate::error::AppError>((tree, awaiting.len()))
        },
    );
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let username = username.clone();
                Suspend::new(async move {
                    let Ok((tree, awaiting)) = data.await else { return None };
                    let names: Vec<String> = tree.iter().map(|(c, _)| c.clone()).collect();
                    // The tree is the same on every cluster; its shares and ratios are each one's.
                    let owned: Vec<_> = tree.first().map(|(_, nodes)| nodes.iter()
                        .filter(|n| n.owners.contains(&username))
                        .map(|n| {
                            let on: Vec<(f64, Option<f64>)> = tree.iter()
                                .map(|(_, nodes)| nodes.iter().find(|m| m.path == n.path)
                                    .map_or((0.0, None), |m| (m.fraction, m.ratio)))
                                .collect();
                            (n.path.clone(), on)
                        })
                        .collect()).unwrap_or_default();
                    if owned.is_empty() && awaiting == 0 {
                        return None;
                    }
                    let several = names.len() > 1;
                    Some(view! {
                        <Card id="overview-owned" title="What you own">
                            <p>
                                {match awaiting {
                                    0 => "No change requests wait for your decision.".to_string(),
                                    1 => "1 change request waits for your decision.".to_string(),
                                    n => format!("{n} change requests wait for your decision."),
                                }}
                                " "
                                {(awaiting > 0).then(|| view! { <a href="/approvals">"Review them"</a> })}
                            </p>
                            {(!owned.is_empty()).then(|| view! {
                                <table class="table compact">
                                    <caption>"How each node you own is served over the lookback window"</caption>
                                    <thead><tr>
                                        <th scope="col">"Node"</th>
                                        {names.iter().map(|c| view! {
                                            <th scope="col" class="num">{if c.is_empty() { "Share of the cluster".to_string() } else { format!("Share of {c}") }}</th>
                                            <th scope="col" class="num">{on_cluster("Ratio", c)}</th>
                                        }).collect_view()}
                                    </tr></thead>
                                    <tbody>
                                        {owned.into_iter().map(|(path, on)| view! {
                                            <tr>
                                                <th scope="row">{match (path.is_empty(), several) {
                                                    (false, _) => path,
                                                    (true, false) => "the whole cluster".to_string(),
                                                    (true, true) => "every cluster (the root)".to_string(),
                                                }}</th>
                                                {on.into_iter().map(|(fraction, ratio)| view! {
                                                    <td class="num">{format!("{:.1}%", fraction * 100.0)}</td>
                                                    <td class="num">{standing(ratio)}</td>
                                                }).collect_view()}
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            })}
                            <p><a class="button button-quiet" href="/tree">"Open the budget tree"</a></p>
                        </Card>
                    })
                })
            }}
        </Suspense>
    }
}

/// This quarter's headline (leadership and admins).
#[component]
fn QuarterCard() -> impl IntoView {
    let review = Resource::new(move || (), move |_| quarterly_review(None, None, false));
    view! {
        <Card id="overview-quarter" title="This quarter">
            <Suspense fallback=|| view! { <p class="loading">"Computing this quarter's figures…"</p> }>
                {move || Suspend::new(async move {
                    match review.await {
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        Ok(r) => {
                            let h = r.headline;
                            let link = match r.quarter {
                                Some((year, quarter)) => format!("/reports?year={year}&quarter={quarter}"),
                                None => "/reports".to_string(),
                            };
                            view! {
                                <dl class="facts">
                                    <dt>"Delivered / owed"</dt><dd>{pct(h.delivered_over_owed)}</dd>
                                    <dt>"Worst team"</dt><dd>{pct(h.worst_team)}</dd>
                                    <dt>"Teams at ≥ 95%"</dt><dd>{format!("{} of {}", h.teams_at_95pct, h.teams)}</dd>
                                    <dt>"Occupancy"</dt><dd>{pct(h.occupancy)}</dd>
                                    <dt>"Debug p90 wait"</dt><dd>{duration_or_dash(h.debug_p90_wait_s)}</dd>
                                </dl>
                                <p><a class="button button-quiet" href=link>{format!("Open the review of {}", r.label)}</a></p>
                            }.into_any()
                        }
                    }
                })}
            </Suspense>
        </Card>
    }
}

/// Nodes that take no new work or whose agent is silent (admins).
#[component]
fn NodesCard() -> impl IntoView {
    let nodes = Resource::new(|| (), |_| list_nodes());
    view! {
        <Card id="overview-nodes" title="Nodes needing attention">
            <Suspense fallback=|| view! { <p class="loading">"Loading the nodes…"</p> }>
                {move || Suspend::new(async move {
                    match nodes.await {
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        Ok(all) if all.is_empty() => view! {
                            <p class="empty">"No GPU nodes are registered yet."</p>
                        }.into_any(),
                        Ok(all) => {
                            let total = all.len();
                            let attention: Vec<_> = all.into_iter().filter(|n| n.state != NodeHealth::Healthy).collect();
                            if attention.is_empty() {
                                view! { <p>{format!("All {total} nodes are healthy and taking work.")}</p> }.into_any()
                            } else {
                                view! {
                                    <ul class="plain">
                                        {attention.into_iter().map(|n| {
                                            let why = match n.state {
                                                NodeHealth::Down if n.heartbeat_age_s.is_none() => "registered, never connected: start its agent or remove it".to_string(),
                                                NodeHealth::Down => "down: its agent stopped answering".to_string(),
                                                NodeHealth::Unhealthy => format!("unhealthy{}", n.health_reason.map(|r| format!(": {r}")).unwrap_or_default()),
                                                NodeHealth::Cordoned => "cordoned for maintenance".to_string(),
                                                NodeHealth::Healthy => String::new(),
                                            };
                                            view! { <li><strong>{n.name}</strong>" — "{why}</li> }
                                        }).collect_view()}
                                    </ul>
                                }.into_any()
                            }
                        }
                    }
                })}
            </Suspense>
            <p><a class="button button-quiet" href="/nodes">"Open the Nodes page"</a></p>
        </Card>
    }
}
