//! Approvals: requests awaiting the signed-in person, their own requests still waiting (to
//! withdraw, or rebase when stale), one request opened from the history (`?request=N`), and the
//! history of every decision.

use crate::{
    budget::{
        api::{list_change_requests, ChangeImpact, DecideChange, RebaseChange, WithdrawChange},
        ChangeRequestView, ChangeState, ImpactView,
    },
    calendar::format_date,
    workloads::sentences::moment,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The actions a request card may offer, shared by every card on the page.
#[derive(Clone, Copy)]
struct Actions {
    decide: ServerAction<DecideChange>,
    withdraw: ServerAction<WithdrawChange>,
    rebase: ServerAction<RebaseChange>,
}

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let actions = Actions {
        decide: ServerAction::<DecideChange>::new(),
        withdraw: ServerAction::<WithdrawChange>::new(),
        rebase: ServerAction::<RebaseChange>::new(),
    };
    let changed = move || {
        (
            actions.decide.version().get(),
            actions.withdraw.version().get(),
            actions.rebase.version().get(),
        )
    };
    let awaiting = Resource::new(changed, |_| list_change_requests("awaiting".into(), None));
    // A decision, withdrawal or rebase changes what waits: the navigation's count follows.
    if let Some(nav) = use_context::<crate::components::shell::NavCountsChanged>() {
        Effect::new(move |first: Option<()>| {
            changed();
            if first.is_some() {
                nav.0.update(|n| *n += 1);
            }
        });
    }
    let all = Resource::new(changed, |_| list_change_requests("all".into(), None));
    let opened = move || {
        use_query_map()
            .get()
            .get("request")
            .and_then(|v| v.parse::<i64>().ok())
    };
    let error = move || {
        let errors = [
            actions.decide.value().get().and_then(Result::err),
            actions.withdraw.value().get().and_then(Result::err),
            actions.rebase.value().get().and_then(Result::err),
        ];
        errors.into_iter().flatten().next().map(|e| e.to_string())
    };
    // The outcome of the latest withdraw or rebase (each effect reruns only for its own action).
    let notice = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if let Some(Ok(new)) = actions.rebase.value().get() {
            notice.set(Some(format!(
                "Rebased onto today's shares as request #{}; the stale one is withdrawn. It waits for an owner's decision.",
                new.id
            )));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(r)) = actions.withdraw.value().get() {
            notice.set(Some(format!(
                "Request #{} is withdrawn; no one can approve it now.",
                r.id
            )));
        }
    });
    view! {
        <Title text="Approvals" />
        <h1>"Approvals"</h1>
        <p class="form-error" role="alert" hidden=move || error().is_none()>{error}</p>
        <p class="notice" role="status">{move || notice.get()}</p>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let list = all.await.unwrap_or_default();
                opened().map(|id| match list.into_iter().find(|r| r.id == id) {
                    Some(request) => view! {
                        <section aria-labelledby="opened-title">
                            <h2 id="opened-title">{format!("Request #{id}")}</h2>
                            <RequestCard request actions />
                        </section>
                    }.into_any(),
                    None => view! { <p class="card empty">{format!("There is no change request #{id} among the latest 200.")}</p> }.into_any(),
                })
            })}
        </Transition>
        <section aria-labelledby="awaiting-title">
            <h2 id="awaiting-title">"Awaiting your decision"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match awaiting.await {
                        Ok(list) if list.is_empty() => view! { <p class="card empty">"Nothing awaits your decision."</p> }.into_any(),
                        Ok(list) => list.into_iter().map(|r| view! { <RequestCard request=r actions /> }).collect_view().into_any(),
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
        <section aria-labelledby="mine-title">
            <h2 id="mine-title">"Your requests still waiting"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    let mine: Vec<ChangeRequestView> = all.await.unwrap_or_default().into_iter().filter(|r| r.can_withdraw).collect();
                    if mine.is_empty() {
                        view! { <p class="card empty">"None: requests you propose from the Budget tree wait here until an owner decides."</p> }.into_any()
                    } else {
                        mine.into_iter().map(|r| view! { <RequestCard request=r actions /> }).collect_view().into_any()
                    }
                })}
            </Transition>
        </section>
        <section aria-labelledby="history-title">
            <h2 id="history-title">"History"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match all.await {
                        Ok(list) if list.is_empty() => view! { <p class="card empty">"No change requests yet."</p> }.into_any(),
                        Ok(list) => view! {
                            <div class="card table-wrap">
                                <table class="table">
                                    <thead><tr>
                                        <th scope="col">"#"</th><th scope="col">"Node"</th><th scope="col">"Proposed by"</th>
                                        <th scope="col">"State"</th><th scope="col">"Decided by"</th><th scope="col">"When"</th><th scope="col">"Why"</th>
                                    </tr></thead>
                                    <tbody>
                                        {list.into_iter().map(|r| view! {
                                            <tr>
                                                <td><a href=format!("/approvals?request={}", r.id) aria-label=format!("Open request #{}", r.id)>{format!("#{}", r.id)}</a></td>
                                                <td>{node_label(&r.node)}{r.cluster.as_ref().map(|c| format!(" (on {c})"))}</td>
                                                <td>{r.proposer.clone()}</td>
                                                <td>
                                                    <span class=format!("state state-{}", r.state) title=r.state.meaning()>{r.state.as_str()}</span>
                                                    {(r.state == ChangeState::Stale).then(|| view! { <span class="hint">{format!(" — {}", r.state.meaning())}</span> })}
                                                    {r.replaced_by.map(|n| view! { <span class="hint">" — rebased as " <a href=format!("/approvals?request={n}")>{format!("#{n}")}</a></span> })}
                                                </td>
                                                <td>{r.decided_by.clone().unwrap_or_default()}</td>
                                                <td>{format_date(r.decided_at.unwrap_or(r.created_at))}</td>
                                                <td>{r.justification.clone()}{(!r.comment.is_empty()).then(|| format!(" — {}", r.comment))}</td>
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

fn node_label(path: &str) -> String {
    if path.is_empty() {
        "the cluster".into()
    } else {
        path.to_string()
    }
}

fn percent(share: Option<f64>, total: f64) -> String {
    match share {
        Some(s) if total > 0.0 => format!("{:.1}%", s / total * 100.0),
        Some(_) => "0%".into(),
        None => "—".into(),
    }
}

#[component]
fn RequestCard(request: ChangeRequestView, actions: Actions) -> impl IntoView {
    let old_total: f64 = request.items.iter().filter_map(|i| i.old_share).sum();
    let new_total: f64 = request.items.iter().filter_map(|i| i.new_share).sum();
    let title = format!(
        "#{} · {}{} · proposed by {}",
        request.id,
        node_label(&request.node),
        request
            .cluster
            .as_ref()
            .map(|c| format!(" on cluster {c} only"))
            .unwrap_or_default(),
        request.proposer
    );
    let comment_id = format!("comment-{}", request.id);
    let impact = ServerAction::<ChangeImpact>::new();
    let id = request.id;
    let when = request
        .effective_at
        .map(|t| {
            format!(
                "Takes effect {} once approved.",
                moment(t, crate::clock::now_s())
            )
        })
        .unwrap_or_else(|| "Takes effect on approval.".into());
    view! {
        <article class="card request" aria-label=title.clone()>
            <h3>{title.clone()}</h3>
            <p>
                <span class=format!("state state-{}", request.state) title=request.state.meaning()>{request.state.as_str()}</span>
                <span class="hint">{format!(" — {}", request.state.meaning())}</span>
            </p>
            <p><strong>"Why: "</strong>{request.justification.clone()}</p>
            <p class="hint">{when}</p>
            <table class="table compact">
                <thead><tr><th scope="col">"Child"</th><th scope="col">"Change"</th><th scope="col" class="num">"Before"</th><th scope="col" class="num">"After"</th></tr></thead>
                <tbody>
                    {request.items.iter().map(|item| view! {
                        <tr>
                            <td>{item.child.clone()}{item.new_name.clone().map(|n| format!(" → {n}"))}</td>
                            <td>{item.action.as_str()}</td>
                            <td class="num">{percent(item.old_share, old_total)}</td>
                            <td class="num">{percent(item.new_share, new_total)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <div class="row">
                <button type="button" class="button-quiet" disabled=move || impact.pending().get()
                    on:click=move |_| { impact.dispatch(ChangeImpact { id }); }>
                    {move || if impact.pending().get() { "Replaying the last 14 days…" } else { "Preview impact" }}
                </button>
            </div>
            {move || impact.value().get().map(|result| match result {
                Ok(view) => view! { <ImpactTable view /> }.into_any(),
                Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
            })}
            {request.can_decide.then(|| view! {
                <ActionForm action=actions.decide attr:class="stack">
                    <input type="hidden" name="id" value=id />
                    <label for=comment_id.clone()>"Comment"</label>
                    <textarea id=comment_id.clone() name="comment" rows="2"></textarea>
                    <div class="row">
                        <button type="submit" name="approve" value="true" class="button">"Approve"</button>
                        <button type="submit" name="approve" value="false" class="button danger">"Reject"</button>
                    </div>
                </ActionForm>
            })}
            {request.can_rebase.then(|| view! {
                <p class="hint">"Stale: another change to these shares took effect after you proposed this. Rebasing proposes the same changes again on today's shares (children you did not name keep theirs) as a new request, and withdraws this one."</p>
                <ActionForm action=actions.rebase>
                    <input type="hidden" name="id" value=id />
                    <button type="submit" class="button">"Rebase onto today's shares"</button>
                </ActionForm>
            })}
            {request.can_withdraw.then(|| {
                // Withdrawing ends the request for good: it is asked for twice.
                let confirming = RwSignal::new(false);
                view! {
                    <div class="row">
                        <button type="button" class="button-quiet danger" hidden=move || confirming.get()
                            on:click=move |_| confirming.set(true)>"Withdraw"</button>
                    </div>
                    <div role="group" aria-label="Confirm withdrawing" class="confirm" hidden=move || !confirming.get()>
                        <p>{format!("Withdraw request #{id}? No one can approve it afterwards; propose again to change these shares.")}</p>
                        <ActionForm action=actions.withdraw>
                            <input type="hidden" name="id" value=id />
                            <button type="submit" class="button danger">"Yes, withdraw it"</button>
                        </ActionForm>
                        <button type="button" class="button-quiet" on:click=move |_| confirming.set(false)>"Keep it"</button>
                    </div>
                }
            })}
        </article>
    }
}

fn hours(x: f64) -> String {
    format!("{x:.1}")
}

fn wait(s: Option<i64>) -> String {
    crate::workloads::sentences::duration_or_dash(s)
}

#[component]
fn ImpactTable(view: ImpactView) -> impl IntoView {
    let gpus = f64::from(view.gpus);
    let share = move |f: f64| format!("{:.1}% ({:.1} GPUs)", f * 100.0, f * gpus);
    view! {
        <div class="table-wrap">
        <table class="table compact impact">
            <caption>{format!(
                "The last {} days replayed twice — {} submissions, the history the usage charts show — on today's {} GPUs, with today's shares and with the proposed ones ({} ms). Ratio: GPU time delivered over GPU time funded (under 1 is under-served).",
                view.days, view.workloads, view.gpus, view.wall_ms
            )}</caption>
            <thead>
                <tr>
                    <th scope="col">"Leaf"</th>
                    <th scope="col" class="num">"Share now"</th>
                    <th scope="col" class="num">"Proposed"</th>
                    <th scope="col" class="num">"Delivered GPU-h now"</th>
                    <th scope="col" class="num">"Proposed"</th>
                    <th scope="col" class="num">"Ratio now"</th>
                    <th scope="col" class="num">"Proposed"</th>
                    <th scope="col" class="num">"p90 wait now"</th>
                    <th scope="col" class="num">"Proposed"</th>
                </tr>
            </thead>
            <tbody>
                {view.rows.into_iter().map(|r| {
                    let change = r.delivered_proposed_gpu_h - r.delivered_now_gpu_h;
                    view! {
                        <tr>
                            <td>{r.path.clone()}</td>
                            <td class="num">{share(r.share_now)}</td>
                            <td class="num">{share(r.share_proposed)}</td>
                            <td class="num">{hours(r.delivered_now_gpu_h)}</td>
                            <td class="num">{format!("{} ({}{})", hours(r.delivered_proposed_gpu_h), if change >= 0.0 { "+" } else { "" }, hours(change))}</td>
                            <td class="num">{crate::workloads::sentences::ratio_or_dash(r.ratio_now)}</td>
                            <td class="num">{crate::workloads::sentences::ratio_or_dash(r.ratio_proposed)}</td>
                            <td class="num">{wait(r.p90_wait_now_s)}</td>
                            <td class="num">{wait(r.p90_wait_proposed_s)}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        </div>
    }
}
