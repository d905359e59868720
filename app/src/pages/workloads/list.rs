//! My workloads (or everyone's): a table that updates itself when anything changes.

use crate::{
    clock::now_s,
    components::badge::StateBadge,
    live::use_live_updates,
    workloads::{
        api::list_workloads, sentences::duration, sentences::moment, WorkloadState, WorkloadView,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn WorkloadsPage() -> impl IntoView {
    let live = use_live_updates();
    let (scope, set_scope) = signal("mine".to_string());
    let (state, set_state) = signal(String::new());
    let workloads = Resource::new(
        move || (live.get(), scope.get(), state.get()),
        |(_, scope, state)| list_workloads(scope == "mine", Some(state)),
    );
    view! {
        <Title text="Workloads" />
        <div class="page-head">
            <h1>"Workloads"</h1>
            <a class="button" href="/workloads/new">"Submit a workload"</a>
        </div>
        <div class="filters" role="group" aria-label="Filters">
            <label for="scope-filter">"Show"</label>
            <select id="scope-filter" on:change=move |ev| set_scope.set(event_target_value(&ev))>
                <option value="mine">"My workloads"</option>
                <option value="all">"Everyone's"</option>
            </select>
            <label for="state-filter">"State"</label>
            <select id="state-filter" on:change=move |ev| set_state.set(event_target_value(&ev))>
                <option value="">"Any"</option>
                {WorkloadState::ALL.iter().map(|s| view! { <option value=s.as_str()>{s.filter_label()}</option> }).collect_view()}
            </select>
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading workloads…"</p> }>
            {move || Suspend::new(async move {
                let filtered = state.get_untracked().parse::<WorkloadState>().ok();
                match workloads.await {
                    Ok(list) if list.is_empty() => match filtered {
                        Some(state) => view! {
                            <section class="card empty">
                                <p>{state.none_in()}</p>
                            </section>
                        }.into_any(),
                        None => view! {
                            <section class="card empty">
                                <p>"No workloads here yet."</p>
                                <p><a href="/workloads/new">"Submit your first workload"</a></p>
                            </section>
                        }.into_any(),
                    },
                    Ok(list) => view! { <WorkloadTable list /> }.into_any(),
                    Err(error) => view! { <p class="form-error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn WorkloadTable(list: Vec<WorkloadView>) -> impl IntoView {
    let now = now_s();
    view! {
        <div class="card table-wrap">
            <table class="table">
                <caption class="visually-hidden">"Workloads"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"Project"</th>
                        <th scope="col">"Owner"</th>
                        <th scope="col" class="num">"GPUs"</th>
                        <th scope="col">"Waiting / running"</th>
                        <th scope="col">"Protected until"</th>
                    </tr>
                </thead>
                <tbody>
                    {list.into_iter().map(|w| {
                        let href = format!("/workloads/{}", w.id);
                        let timing = timing(&w, now);
                        let running = w.state == WorkloadState::Running;
                        let protected = match (running, w.protected_until) {
                            (true, Some(t)) if t > now => moment(t, now),
                            (true, None) => "interruptible (free)".to_string(),
                            (true, Some(_)) => "passed".to_string(),
                            _ => String::new(),
                        };
                        view! {
                            <tr>
                                <td><a href=href>{w.name.clone()}</a></td>
                                <td>
                                    <StateBadge state=w.state />
                                    {w.squatting().then(|| view! {
                                        <span class="state state-idle" title=format!("Its GPUs have been nearly idle (under 5%) for {}", duration(w.idle_for_s.unwrap_or_default()))>
                                            "idle GPUs"
                                        </span>
                                    })}
                                </td>
                                <td>{w.project.clone()}</td>
                                <td>{w.owner.clone()}</td>
                                <td class="num">{w.gpus}</td>
                                <td>{timing}</td>
                                <td>{protected}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// "waiting 3 min", "running 1 h 2 min", "ran 14 min".
pub fn timing(w: &WorkloadView, now: i64) -> String {
    match w.state {
        WorkloadState::Queued => format!("waiting {}", duration(now - w.submitted_at)),
        WorkloadState::Running => {
            format!("running {}", duration(now - w.started_at.unwrap_or(now)))
        }
        _ => format!("ran {}", duration(w.progress_s)),
    }
}
