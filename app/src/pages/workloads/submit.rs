//! Submit a workload: the scheduling contract in one form.

use crate::{
    components::field::{FieldError, FormError},
    workloads::{
        api::{get_workload_detail, submit_choices, SubmitWorkload},
        duration::parse_duration,
        sentences::duration,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};

/// Shortcuts under the minimum-runtime field (those above the cluster's cap are left out).
const PRESETS: [(i64, &str); 5] = [
    (0, "0 (free)"),
    (900, "15 min (debug)"),
    (3600, "1 h"),
    (14_400, "4 h"),
    (28_800, "8 h"),
];

#[component]
pub fn SubmitPage() -> impl IntoView {
    let submit = ServerAction::<SubmitWorkload>::new();
    let choices = Resource::new(|| (), |_| submit_choices());
    let query = use_query_map();
    let from = move || {
        query
            .read()
            .get("from")
            .and_then(|id| id.parse::<i64>().ok())
    };
    let original = Resource::new(from, |from| async move {
        match from {
            Some(id) => get_workload_detail(id).await.ok().map(|d| d.workload),
            None => None,
        }
    });
    let error = Signal::derive(move || submit.value().get().and_then(Result::err));
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(workload)) = submit.value().get() {
            navigate(&format!("/workloads/{}", workload.id), Default::default());
        }
    });
    let describe = move |field: &'static str, id: &'static str| {
        move || error.get().and_then(|e| e.for_field(field)).map(|_| id)
    };

    view! {
        <Title text="Submit a workload" />
        <h1>"Submit a workload"</h1>
        <Suspense fallback=|| view! { <p class="loading">"Loading your projects…"</p> }>
            {move || Suspend::new(async move {
                let (projects, cap, clusters) = match choices.await {
                    Ok(c) => (c.projects, c.max_min_runtime_s, c.clusters),
                    // Said as it is, never shown as "no projects".
                    Err(e) => return view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                };
                let original = original.await;
                if projects.is_empty() {
                    return view! {
                        <section class="card empty">
                            <p>"You are not a member of any project yet, so there is nothing to charge work to."</p>
                            <p>"Ask a project's owner to add you."</p>
                        </section>
                    }.into_any();
                }
                let o = original.clone();
                // A resubmission charges its old project; where the submitter is no longer a member
                // of it, they choose (never a silent switch to another project).
                let lost_project = o
                    .as_ref()
                    .map(|w| w.project.clone())
                    .filter(|p| !projects.contains(p));
                let chosen_project = o.as_ref().map(|w| w.project.clone()).unwrap_or_default();
                let chosen_runtime = o.as_ref().map(|w| w.min_runtime_s).unwrap_or(900.min(cap));
                let runtime = RwSignal::new(duration(chosen_runtime));
                view! {
                    <ActionForm action=submit attr:class="card stack form-wide">
                        <FormError error />
                        {original.as_ref().map(|w| view! {
                            <p class="notice">{format!("Resubmitting {} (#{}).", w.name, w.id)}</p>
                        })}
                        <label for="project">"Project"</label>
                        {lost_project.clone().map(|p| view! {
                            <p class="notice" id="project-lost">{format!("You are no longer a member of {p}: choose the project to charge.")}</p>
                        })}
                        <select id="project" name="project" required aria-describedby=describe("project", "project-error")>
                            {lost_project.is_some().then(|| view! { <option value="" selected=true disabled=true>"Choose a project"</option> })}
                            {projects.into_iter().map(|p| {
                                let selected = p == chosen_project;
                                view! { <option value=p.clone() selected=selected>{p.clone()}</option> }
                            }).collect_view()}
                        </select>
                        <FieldError id="project-error" field="project" error />

                        {(clusters.len() > 1).then(|| {
                            let chosen = o.as_ref().map(|w| w.cluster.clone()).unwrap_or_default();
                            view! {
                                <label for="cluster">"Cluster"</label>
                                <select id="cluster" name="cluster" required aria-describedby=describe("cluster", "cluster-error")>
                                    <option value="" selected=chosen.is_empty() disabled=true>"Choose a cluster"</option>
                                    {clusters.into_iter().map(|c| {
                                        let selected = c == chosen;
                                        view! { <option value=c.clone() selected=selected>{c.clone()}</option> }
                                    }).collect_view()}
                                </select>
                                <FieldError id="cluster-error" field="cluster" error />
                            }
                        })}

                        <label for="name">"Name"</label>
                        <input id="name" name="name" type="text" required maxlength="120"
                            value=o.as_ref().map(|w| w.name.clone()).unwrap_or_default()
                            aria-describedby=describe("name", "name-error") />
                        <FieldError id="name-error" field="name" error />

                        <label for="command">"Command"</label>
                        <textarea id="command" name="command" rows="3" required spellcheck="false"
                            aria-describedby=describe("command", "command-error")>
                            {o.as_ref().map(|w| w.command.clone()).unwrap_or_default()}
                        </textarea>
                        <FieldError id="command-error" field="command" error />
                        <p class="hint">"Runs under sh -c with CUDA_VISIBLE_DEVICES set to its GPUs."</p>

                        <label for="gpus">"GPUs"</label>
                        <input id="gpus" name="gpus" type="number" min="1" required
                            value=o.as_ref().map(|w| w.gpus).unwrap_or(1).to_string()
                            aria-describedby=describe("gpus", "gpus-error") />
                        <FieldError id="gpus-error" field="gpus" error />

                        <label for="min-runtime">"Minimum runtime"</label>
                        <input id="min-runtime" name="min_runtime" type="text" required
                            value=duration(chosen_runtime)
                            prop:value=move || runtime.get()
                            on:input=move |ev| runtime.set(event_target_value(&ev))
                            aria-describedby=move || {
                                let mut ids = vec!["min-runtime-hint"];
                                ids.extend(describe("min_runtime_s", "min-runtime-error")());
                                ids.join(" ")
                            } />
                        <div class="presets" role="group" aria-label="Minimum runtime shortcuts">
                            {PRESETS.into_iter().filter(|(seconds, _)| *seconds <= cap).map(|(seconds, label)| view! {
                                <button type="button" class="button-quiet"
                                    aria-pressed=move || (parse_duration(&runtime.get()) == Some(seconds)).to_string()
                                    on:click=move |_| runtime.set(duration(seconds))>
                                    {label}
                                </button>
                            }).collect_view()}
                        </div>
                        <p class="hint" id="min-runtime-hint">
                            {format!("Any duration up to this cluster's cap of {}: e.g. 15 min, 2 h, 1 h 30 min.", duration(cap))}
                        </p>
                        <FieldError id="min-runtime-error" field="min_runtime_s" error />
                        <p class="hint contract">
                            "The contract: for its minimum runtime a workload is protected from preemption and charged to "
                            "the project; after that it keeps running while its project is not over-served. "
                            "A minimum runtime of 0 makes it free: never charged, on idle GPUs only, preemptible at any moment "
                            "(free work that cannot resume starts after free work that can, so that less work is lost)."
                        </p>

                        <label class="check">
                            <input id="resumable" name="resumable" type="checkbox"
                                checked=o.as_ref().map(|w| w.resumable).unwrap_or(true) />
                            "Resumable"
                        </label>
                        <p class="hint">"A resumable workload that is preempted goes back to the queue; others end and must be resubmitted."</p>

                        <label for="priority">"Priority"</label>
                        <input id="priority" name="priority" type="number" min="-1000" max="1000"
                            value=o.as_ref().map(|w| w.priority).unwrap_or(0).to_string()
                            aria-describedby=describe("priority", "priority-error") />
                        <FieldError id="priority-error" field="priority" error />
                        <p class="hint">"Orders only your project's own work; it never overtakes another project."</p>

                        <button type="submit" class="button" disabled=move || submit.pending().get()>
                            {move || if submit.pending().get() { "Submitting…" } else { "Submit" }}
                        </button>
                    </ActionForm>
                }.into_any()
            })}
        </Suspense>
    }
}
