//! Settings (admin): the scheduler's knobs, validated, applied live and audited.

use crate::{
    clock::now_s,
    components::{
        field::{FieldError, FormError},
        time::Moment,
    },
    settings::{
        api::{get_settings, UpdateSettings},
        webhook::{get_webhook, SetWebhook, TestWebhook, WebhookView},
        SettingsView,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

/// The months, for the fiscal year's start.
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

#[component]
pub fn SettingsPage() -> impl IntoView {
    let update = ServerAction::<UpdateSettings>::new();
    // The action's error is made here, not in the form below: the action's result reloads
    // the settings and replaces it, and the replaced form may still be told of the new value as
    // it goes, when a signal made in it would be gone (see the workload page).
    let update_error = Signal::derive(move || update.value().get().and_then(Result::err));
    let set = ServerAction::<SetWebhook>::new();
    // A saved webhook adds a line to the history (a refused one keeps what was typed).
    let saved = RwSignal::new(0u32);
    Effect::new(move || {
        if matches!(set.value().get(), Some(Ok(_))) {
            saved.update(|n| *n += 1);
        }
    });
    let settings = Resource::new(
        move || (update.version().get(), saved.get()),
        |_| get_settings(),
    );
    let test = ServerAction::<TestWebhook>::new();
    let webhook = Resource::new(
        move || (saved.get(), test.version().get()),
        |_| get_webhook(),
    );
    view! {
        <Title text="Settings" />
        <h1>"Scheduler settings"</h1>
        <Transition fallback=|| view! { <p class="loading">"Loading settings…"</p> }>
            {move || Suspend::new(async move {
                match settings.await {
                    Ok(view) => {
                        let admin = view.can_edit;
                        view! {
                            <SettingsForm view update error=update_error />
                            {admin.then(|| view! {
                                <Transition fallback=|| ()>
                                    {move || Suspend::new(async move {
                                        webhook.await.ok().map(|view| view! { <Webhook view set test /> })
                                    })}
                                </Transition>
                            })}
                        }.into_any()
                    }
                    Err(error) => view! { <p class="form-error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn SettingsForm(
    view: SettingsView,
    update: ServerAction<UpdateSettings>,
    /// The action's error (made by the page, which outlives this form).
    error: Signal<Option<crate::error::AppError>>,
) -> impl IntoView {
    let saved = move || matches!(update.value().get(), Some(Ok(_)));
    let disabled = !view.can_edit;
    let field = move |(id, error_id): (&'static str, &'static str),
                      name: &'static str,
                      label: &'static str,
                      value: String,
                      hint: &'static str,
                      step: &'static str| {
        let describe = move || {
            error
                .get()
                .and_then(|e| e.for_field(name))
                .map(|_| error_id)
        };
        view! {
            <label for=id>{label}</label>
            <input id=id name=name type="number" step=step value=value required disabled=disabled aria-describedby=describe />
            <FieldError id=error_id field=name error />
            <p class="hint">{hint}</p>
        }
    };
    view! {
        <div class="columns">
            <ActionForm action=update attr:class="card stack form-wide">
                <FormError error />
                {(!view.can_edit).then(|| view! { <p class="notice">"Only administrators can change these."</p> })}
                {field(("window", "window-error"), "window_days", "Lookback window (days)", view.window_days.to_string(),
                    "Usage counts toward fair share over this sliding window.", "0.25")}
                {field(("cap", "cap-error"), "max_min_runtime_hours", "Minimum-runtime cap (hours)", view.max_min_runtime_hours.to_string(),
                    "The longest protection a workload may ask for: 0.25 to 168 hours.", "0.25")}
                {field(("damping", "damping-error"), "damping_margin", "Damping margin", view.damping_margin.to_string(),
                    "A waiting workload preempts only if the running side's ratio is higher by more than this.", "0.005")}
                {field(("kill-margin", "kill-margin-error"), "kill_margin", "Kill margin (work that cannot resume)", view.kill_margin.to_string(),
                    "Work that cannot resume loses its progress when preempted: it is taken only past this wider margin, at least the damping margin.", "0.005")}
                {field(("heartbeat", "heartbeat-error"), "heartbeat_deadline_s", "Heartbeat deadline (seconds)", view.heartbeat_deadline_s.to_string(),
                    "A node silent this long is marked down and its work requeued.", "1")}
                {field(("grace", "grace-error"), "grace_s", "Preemption grace period (seconds)", view.grace_s.to_string(),
                    "Between SIGTERM and SIGKILL when a workload is stopped.", "1")}
                {field(("output-retention", "output-retention-error"), "output_retention_days", "Keep output for (days)", view.output_retention_days.to_string(),
                    "A finished workload's output is cleared this many days after it ended: 1 to 3,650.", "1")}
                {field(("event-retention", "event-retention-error"), "event_retention_days", "Keep timelines for (days)", view.event_retention_days.to_string(),
                    "A finished workload's events are deleted this many days after it ended, except preemptions and drains, which reports count: 1 to 3,650.", "1")}
                <fieldset class="stack">
                    <legend>"Fast lane for debug work"</legend>
                    {field(("fast-lane", "fast-lane-error"), "fast_lane", "Fast lane share", view.fast_lane.to_string(),
                        "Debug work (up to 8 GPUs, a minimum runtime of at most 15 minutes) starts ahead of other funded work and may preempt unprotected work that can resume, of any team, while the lane holds at most this fraction of the GPUs on average: 0 to 0.5; 0 turns the lane off.", "0.01")}
                    {field(("fast-lane-peak", "fast-lane-peak-error"), "fast_lane_peak", "Fast lane peak", view.fast_lane_peak.to_string(),
                        "The most of the GPUs the lane may hold at once while its average is under its share, for bursts of debug work: at least the share, at most 1.", "0.01")}
                    {field(("fast-lane-window", "fast-lane-window-error"), "fast_lane_window_minutes", "Fast lane window (minutes)", view.fast_lane_window_minutes.to_string(),
                        "The lane's average is taken over this many minutes: 1 to 1,440.", "1")}
                    {field(("headroom", "headroom-error"), "headroom_fraction", "Headroom for debug work", view.headroom_fraction.to_string(),
                        "Other funded work starts only while this fraction of the GPUs stays idle or holds work debug work may take, so the next debug workload starts at once: 0 to 0.2; 0 turns it off. Funded teams pay for it in GPUs kept free.", "0.005")}
                </fieldset>
                <label for="fiscal-start">"Fiscal year starts in"</label>
                <select id="fiscal-start" name="fiscal_start_month" disabled=disabled aria-describedby="fiscal-start-hint">
                    {MONTHS.iter().enumerate().map(|(i, name)| {
                        let month = i as u32 + 1;
                        view! { <option value=month.to_string() selected=month == view.fiscal_start_month>{*name}</option> }
                    }).collect_view()}
                </select>
                <p class="hint" id="fiscal-start-hint">"The Reports page's quarters: January gives calendar quarters; October gives Q1 FY2027 from October 2026."</p>
                <label class="check" for="auto-recover">
                    <input id="auto-recover" name="auto_recover_nodes" type="checkbox" checked=view.auto_recover_nodes disabled=disabled />
                    "Return nodes to service when their agent reports healthy again"
                </label>
                <p class="hint">"A node whose own health check failed drains by itself. Unchecked, it stays out of service until an admin uncordons it."</p>
                {view.can_edit.then(|| {
                    let describe = move || error.get().and_then(|e| e.for_field("reason")).map(|_| "reason-error");
                    view! {
                        <label for="reason">"Reason for the change (optional)"</label>
                        <textarea id="reason" name="reason" rows="2" maxlength="500" aria-describedby=describe></textarea>
                        <FieldError id="reason-error" field="reason" error />
                        <p class="hint">"Shown beside each changed setting in the history."</p>
                    }
                })}
                {view.can_edit.then(|| view! {
                    <button type="submit" class="button" disabled=move || update.pending().get()>"Save settings"</button>
                    <p class="notice" role="status">{move || saved().then_some("Saved; the scheduler uses them from its next decision.")}</p>
                })}
            </ActionForm>
            <section class="card grow">
                <h2>"Change history"</h2>
                {if view.history.is_empty() {
                    view! { <p class="empty">"No changes yet: the built-in defaults are in force."</p> }.into_any()
                } else {
                    view! {
                        <table class="table compact" aria-label="Change history">
                            <thead><tr><th scope="col">"When"</th><th scope="col">"Who"</th><th scope="col">"Setting"</th><th scope="col">"From"</th><th scope="col">"To"</th><th scope="col">"Reason"</th></tr></thead>
                            <tbody>
                                {view.history.iter().map(|c| view! {
                                    <tr>
                                        <td><Moment at=c.at now=now_s() /></td>
                                        <td>{c.by.clone()}</td>
                                        <td>{if c.label.is_empty() { c.key.clone() } else { c.label.clone() }}</td>
                                        <td>{c.old_value.clone()}</td>
                                        <td>{c.new_value.clone()}</td>
                                        <td>{c.reason.clone().unwrap_or_else(|| "—".into())}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }}
            </section>
        </div>
    }
}

/// Where notifications go besides the inbox, and how the latest deliveries went.
#[component]
fn Webhook(
    view: WebhookView,
    set: ServerAction<SetWebhook>,
    test: ServerAction<TestWebhook>,
) -> impl IntoView {
    let error = Signal::derive(move || {
        set.value()
            .get()
            .and_then(Result::err)
            .or_else(|| test.value().get().and_then(Result::err))
    });
    let describe = move || {
        error
            .get()
            .and_then(|e| e.for_field("url"))
            .map(|_| "webhook-url-error")
    };
    let now = now_s();
    let has_url = view.url.is_some();
    view! {
        <section class="card" aria-labelledby="webhook-title">
            <h2 id="webhook-title">"Webhook"</h2>
            <p class="hint">"The inbox's notifications are also POSTed here as Slack-compatible JSON, retried with backoff."</p>
            <p>"Now: " {view.url.unwrap_or_else(|| "none".into())}</p>
            <ActionForm action=set attr:class="stack">
                <FormError error />
                <label for="webhook-url">"Webhook URL"</label>
                <input id="webhook-url" name="url" type="text" inputmode="url" autocomplete="off" placeholder="https://hooks.slack.com/services/…" aria-describedby=describe />
                <FieldError id="webhook-url-error" field="url" error />
                <label for="webhook-reason">"Reason (optional)"</label>
                <input id="webhook-reason" name="reason" type="text" maxlength="500" />
                <button type="submit" class="button" disabled=move || set.pending().get()>
                    {if has_url { "Replace (empty removes it)" } else { "Save webhook" }}
                </button>
            </ActionForm>
            {has_url.then(|| view! {
                <ActionForm action=test>
                    <button type="submit" class="button-quiet" disabled=move || test.pending().get()>"Send a test message"</button>
                </ActionForm>
            })}
            {(!view.deliveries.is_empty()).then(|| view! {
                <table class="table compact" aria-label="Deliveries">
                    <thead><tr><th scope="col">"When"</th><th scope="col">"Message"</th><th scope="col">"State"</th><th scope="col">"Error"</th></tr></thead>
                    <tbody>
                        {view.deliveries.into_iter().map(|d| view! {
                            <tr>
                                <td><Moment at=d.at now /></td>
                                <td>{d.summary}</td>
                                <td>{format!("{} ({}×)", d.state.label(), d.attempts)}</td>
                                <td>{d.error.unwrap_or_default()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}
