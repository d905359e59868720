//! One workload: where it runs, why it waits or was preempted, its timeline and output.

use crate::{
    calendar::format_date,
    clock::now_s,
    components::{
        badge::StateBadge, cluster_filter::use_clusters, field::FormError,
        sparkline::UtilizationSpark, time::Moment,
    },
    live::use_live_updates,
    workloads::{
        api::{get_workload_detail, CancelWorkload},
        reasons::Event,
        sentences::{
            drain, duration, moment, preemption, rank_in_words, ratio_or_dash, start_estimate,
            stop_reason, waiting_for,
        },
        EventView, QueueExplanation, StartEstimate, WorkloadDetail, WorkloadState,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn WorkloadPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let live = use_live_updates();
    let cancel = ServerAction::<CancelWorkload>::new();
    // Made here, not in `Detail`: a cancel reloads the workload and replaces `Detail`, and the
    // old one's error banner may still be told of the action's new value as it goes. A signal
    // made in `Detail` would be gone by then (reading it panicked in the browser test once).
    let cancel_error = Signal::derive(move || cancel.value().get().and_then(Result::err));
    let detail = Resource::new(
        move || (id(), live.get(), cancel.version().get()),
        |(id, _, _)| get_workload_detail(id),
    );
    let clusters = use_clusters();
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading the workload…"</p> }>
            {move || Suspend::new(async move {
                let several_clusters = clusters.await.len() > 1;
                match detail.await {
                    Ok(detail) => {
                        view! { <Detail detail cancel cancel_error several_clusters /> }.into_any()
                    }
                    Err(error) => view! {
                        <Title text="Workload" />
                        <section class="card narrow"><h1>"Workload"</h1><p role="alert">{error.to_string()}</p></section>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Detail(
    detail: WorkloadDetail,
    cancel: ServerAction<CancelWorkload>,
    /// The cancel action's error, if its last try failed.
    cancel_error: Signal<Option<crate::error::AppError>>,
    /// Whether the lab has more than one cluster: then every workload names its own, `default`
    /// included.
    several_clusters: bool,
) -> impl IntoView {
    let w = detail.workload.clone();
    let now = now_s();
    let last_stop = detail
        .events
        .iter()
        .rev()
        .find_map(|e| stop_reason(&e.event, now).map(|text| (e.event.kind(), text)));
    let resubmit = format!("/workloads/new?from={}", w.id);
    let placement = detail
        .placement
        .iter()
        .map(|p| {
            format!(
                "{}: GPU {}",
                p.node,
                p.gpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let running = w.state == WorkloadState::Running;
    let protection = match (running, w.protected_until) {
        (true, Some(t)) if t > now => {
            format!(
                "protected until {} ({} left)",
                moment(t, now),
                duration(t - now)
            )
        }
        (true, Some(_)) => {
            "minimum runtime passed: preemptible if its project is over-served".into()
        }
        (true, None) => "free work: interruptible at any moment".into(),
        _ => String::new(),
    };
    // Its wait (to its first start, or so far), its run time over all its runs, and what was
    // charged for it.
    let waited = match w.first_started_at {
        Some(t) => duration(t - w.submitted_at),
        None => format!("{} so far", duration(now - w.submitted_at)),
    };
    let ran = (detail.runs > 0).then(|| {
        let times = if detail.runs == 1 {
            String::new()
        } else {
            format!(" over {} runs", detail.runs)
        };
        format!("{}{times}", duration(detail.ran_s))
    });
    let charged = (detail.runs > 0).then(|| {
        if w.min_runtime_s == 0 {
            "nothing: free work".to_string()
        } else {
            format!("{:.2} GPU-hours to {}", detail.charged_gpu_h, w.project)
        }
    });
    let gpu_use = detail.utilization.clone().map(|u| {
        let gpus = if w.gpus == 1 {
            "its GPU".to_string()
        } else {
            format!("its {} GPUs", w.gpus)
        };
        let simulated = if u.simulated {
            " (simulated: a demo node)"
        } else {
            ""
        };
        let words = format!("used {:.0}% of {gpus}{simulated}", u.mean * 100.0);
        (words, u)
    });
    view! {
        <Title text=w.name.clone() />
        <div class="page-head">
            <h1>{w.name.clone()} " " <StateBadge state=w.state /></h1>
            <div class="actions">
                {detail.can_resubmit.then(|| view! {
                    <a class="button button-quiet" href=resubmit>"Resubmit"</a>
                })}
                {detail.can_cancel.then(|| {
                    // Cancelling stops a run for good: it is asked for twice.
                    let confirming = RwSignal::new(false);
                    let question = if running {
                        format!("Cancel {}? Its run is stopped now and will not resume.", w.name)
                    } else {
                        format!("Cancel {}? It leaves the queue.", w.name)
                    };
                    view! {
                        <button type="button" class="button danger" hidden=move || confirming.get()
                            on:click=move |_| confirming.set(true)>"Cancel workload"</button>
                        <div role="group" aria-label="Confirm cancelling" class="confirm" hidden=move || !confirming.get()>
                            <p>{question}</p>
                            <ActionForm action=cancel>
                                <input type="hidden" name="id" value=w.id />
                                <button type="submit" class="button danger">"Yes, cancel it"</button>
                            </ActionForm>
                            <button type="button" class="button-quiet" on:click=move |_| confirming.set(false)>"Keep it"</button>
                        </div>
                    }
                })}
            </div>
        </div>
        <FormError error=cancel_error />
        {detail.leaving.clone().map(|l| {
            let why = match l.state {
                crate::nodes::NodeHealth::Unhealthy => "failed its health check",
                _ => "was taken out of service by an admin",
            };
            let then = if w.resumable {
                "then it waits in the queue again and resumes on another node"
            } else {
                "then it ends, since it is not resumable: save what you need before then"
            };
            view! {
                <p class="callout" role="note" aria-label="Its node is being drained">
                    <strong>{format!("Its node {} is being drained. ", l.node)}</strong>
                    {format!("The node {why}; this workload will be stopped at {} when its minimum runtime ends, {then}.", moment(l.at, now))}
                </p>
            }
        })}
        <div class="columns">
            <section class="card grow">
                <h2>"Details"</h2>
                <dl class="facts">
                    <dt>"Project"</dt><dd>{w.project.clone()}</dd>
                    {((several_clusters || w.cluster != "default") && !w.cluster.is_empty()).then(|| view! { <dt>"Cluster"</dt><dd>{w.cluster.clone()}</dd> })}
                    <dt>"Waited"</dt><dd>{waited}</dd>
                    {ran.map(|r| view! { <dt>"Ran"</dt><dd>{r}</dd> })}
                    {charged.map(|c| view! { <dt>"Charged"</dt><dd>{c}</dd> })}
                    {gpu_use.map(|(words, u)| view! {
                        {u.squatting().then(|| view! {
                            <dt>"Idle GPUs"</dt>
                            <dd class="warning" role="status">{format!(
                                "Its GPUs have been nearly idle (under 5%) for {}. Others may be waiting for them: \
                                 if it is stuck, cancel it.",
                                duration(u.idle_for_s.unwrap_or_default()))}</dd>
                        })}
                        <dt>"GPU use"</dt>
                        <dd class="gpu-use">{words} <UtilizationSpark utilization=u /></dd>
                    })}
                    <dt>"Owner"</dt><dd>{w.owner.clone()}</dd>
                    <dt>"GPUs"</dt><dd>{w.gpus}</dd>
                    <dt>"Minimum runtime"</dt>
                    <dd>{if w.min_runtime_s == 0 { "0 (free)".to_string() } else { duration(w.min_runtime_s) }}</dd>
                    <dt>"Resumable"</dt><dd>{if w.resumable { "yes" } else { "no" }}</dd>
                    <dt>"Priority"</dt><dd>{w.priority}</dd>
                    <dt>"Command"</dt><dd><code>{w.command.clone()}</code></dd>
                    {(!placement.is_empty()).then(|| view! { <dt>"Running on"</dt><dd>{placement.clone()}</dd> })}
                    {(!protection.is_empty()).then(|| view! { <dt>"Protection"</dt><dd>{protection.clone()}</dd> })}
                    {w.exit_code.map(|code| view! { <dt>"Exit code"</dt><dd>{code}</dd> })}
                </dl>
            </section>
            <div class="grow">
                {detail.queue.clone().map(|q| view! { <WhyWaiting queue=q estimate=detail.estimated_start /> })}
                {last_stop.map(|(kind, text)| view! {
                    <section class="card why" aria-labelledby="why-stopped">
                        <h2 id="why-stopped">{if kind == "drained" { "Why it was drained" } else { "Why it was preempted" }}</h2>
                        <p>{text}</p>
                    </section>
                })}
            </div>
        </div>
        <section class="card">
            <h2>"Timeline"</h2>
            {detail.events_removed_at.map(|at| view! {
                <p class="hint">{format!(
                    "Older events were removed on {} under the retention setting; preemptions and drains are kept.",
                    format_date(at)
                )}</p>
            })}
            <ol class="timeline">
                {detail.events.iter().map(|e| view! { <TimelineEntry event=e.clone() /> }).collect_view()}
            </ol>
        </section>
        <section class="card">
            <h2>"Output"</h2>
            {if let Some(at) = detail.output_removed_at {
                view! { <p class="hint">{format!(
                    "The output was removed on {} under the retention setting (finished workloads keep it for a set number of days).",
                    format_date(at)
                )}</p> }.into_any()
            } else if detail.log_tail.is_empty() {
                view! { <p class="hint">"No output yet."</p> }.into_any()
            } else {
                view! { <pre class="log" aria-label="Output log">{detail.log_tail.clone()}</pre> }.into_any()
            }}
        </section>
    }
}

#[component]
fn WhyWaiting(queue: QueueExplanation, estimate: Option<StartEstimate>) -> impl IntoView {
    let now = crate::clock::now_s();
    view! {
        <section class="card why" aria-labelledby="why-waiting">
            <h2 id="why-waiting">"Why it waits"</h2>
            <p>{format!("Position {} of {} in the queue; its project ranks {} in fair-share order.", queue.position, queue.queue_len, queue.leaf_rank)}</p>
            <p class="rank-in-words">{rank_in_words(&queue.path)}</p>
            <p>{waiting_for(&queue.waiting_for, now)}</p>
            {match estimate {
                Some(e) => view! { <p class="estimate" role="note" aria-label="Estimated start">{start_estimate(&e, now)}</p> }.into_any(),
                None => view! { <p class="hint">"Its start is being estimated; the estimate appears here within half a minute."</p> }.into_any(),
            }}
            <table class="table compact">
                <caption>"Usage ratio along its path: usage ÷ funded over the window, below 1 is under-served. Siblings rank by it, with the last two hours' ratio weighing 15%, so a team that has just had its share lets an equally served sibling go first."</caption>
                <thead><tr><th scope="col">"Node"</th><th scope="col" class="num">"Ratio"</th><th scope="col" class="num">"Last 2 h"</th><th scope="col" class="num">"Rank among siblings"</th></tr></thead>
                <tbody>
                    {queue.path.iter().map(|step| view! {
                        <tr>
                            <td>{step.path.clone()}</td>
                            <td class="num">{ratio_or_dash(step.ratio)}</td>
                            <td class="num">{ratio_or_dash(step.recent_ratio)}</td>
                            <td class="num">{format!("{} of {}", step.sibling_rank, step.siblings)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

#[component]
fn TimelineEntry(event: EventView) -> impl IntoView {
    let now = crate::clock::now_s();
    let kind = event.event.kind();
    let text = match &event.event {
        Event::Submitted { by } => format!("Submitted by {by}."),
        Event::Started {
            placement,
            protected_until,
            resumed,
            ..
        } => {
            let nodes = placement
                .iter()
                .map(|p| {
                    let gpus: Vec<String> = p.gpus.iter().map(u32::to_string).collect();
                    format!("{} GPU [{}]", p.node, gpus.join(","))
                })
                .collect::<Vec<_>>()
                .join("; ");
            let resumed = if *resumed { "Resumed" } else { "Started" };
            let protection = protected_until
                .map(|t| format!(", protected until {}", moment(t, now)))
                .unwrap_or_else(|| ", interruptible (free)".into());
            format!("{resumed} on {nodes}{protection}.")
        }
        Event::Preempted(p) => preemption(p, now),
        Event::Drained(d) => drain(d, now),
        Event::Succeeded { .. } => "Finished successfully (exit code 0).".into(),
        Event::Failed {
            exit_code: Some(code),
            ..
        } => format!("Failed (exit code {code})."),
        Event::Failed {
            exit_code: None,
            note,
        } => format!(
            "Failed ({}).",
            note.as_deref().unwrap_or("its exit code is unknown")
        ),
        Event::Cancelled { by } => format!("Cancelled by {by}."),
    };
    view! {
        <li>
            <Moment at=event.at now />
            <span class=format!("event event-{kind}")>{kind}</span>
            <span>{text}</span>
        </li>
    }
}
