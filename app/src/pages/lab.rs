//! The simulator lab: pick or upload an input, run fair share, the priority baseline and the
//! SLURM peer side by side on the server, and compare them in a table, charts and a Gantt chart of the first GPUs.

use crate::{
    clock::now_s,
    components::{
        chart::{ChartScript, TeamsChart, WaitsChart},
        field::{FieldError, FormError},
        gantt::GanttChart,
    },
    error::AppError,
    lab::{
        api::{get_lab_run, lab_runs, lab_sources, start_lab_run},
        policy_label, LabForm, LabResult, LabRunView, LabState, POLICIES,
    },
    pages::reports::pct,
    workloads::sentences::{duration, duration_or_dash, moment, ratio_or_dash},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_params_map};

#[component]
pub fn LabPage() -> impl IntoView {
    let sources = Resource::new(|| (), |_| lab_sources());
    let runs = Resource::new(|| (), |_| lab_runs());
    view! {
        <Title text="Simulator lab" />
        <h1>"Simulator lab"</h1>
        <p class="lede">
            "Replay a month of work under fair share, under the priority baseline (the pre-budget world) and under "
            "a well-configured SLURM site (multifactor priority with Fair Tree, a scavenger QOS, EASY backfill), "
            "with the same engine the cluster runs, and compare what each team was owed and delivered."
        </p>
        <Suspense fallback=|| view! { <p class="loading">"Loading the lab…"</p> }>
            {move || Suspend::new(async move {
                match sources.await {
                    Ok(s) => view! { <LabFormView philly=s.philly philly_note=s.philly_note /> }.into_any(),
                    Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let runs = runs.await.unwrap_or_default();
                (!runs.is_empty()).then(|| view! { <RecentRuns runs /> })
            })}
        </Suspense>
    }
}

#[component]
fn RecentRuns(runs: Vec<LabRunView>) -> impl IntoView {
    let chosen = RwSignal::new(Vec::<u64>::new());
    let toggle = move |id: u64, on: bool| {
        chosen.update(|c| {
            c.retain(|&x| x != id);
            if on {
                c.push(id);
            }
        })
    };
    let (ratio, wait) = (ratio_or_dash, duration_or_dash);
    view! {
        <section class="card table-wrap" aria-labelledby="recent-runs">
            <h2 id="recent-runs">"Recent runs"</h2>
            <p class="hint">"The lab keeps its last runs until the server restarts. Tick two finished runs to compare them."</p>
            <table class="table">
                <thead><tr>
                    <th scope="col">"Compare"</th>
                    <th scope="col">"Input"</th>
                    <th scope="col">"Settings"</th>
                    <th scope="col" class="num">"GPUs"</th>
                    <th scope="col" class="num">"Workloads"</th>
                    <th scope="col" class="num">"Debug p90 (fair share / baseline / SLURM)"</th>
                    <th scope="col" class="num">"Worst team delivered ÷ owed (fair share / baseline / SLURM)"</th>
                    <th scope="col">"Requested"</th>
                    <th scope="col">"State"</th>
                </tr></thead>
                <tbody>
                    {runs.into_iter().map(|r| {
                        let id = r.id;
                        let done = r.state == LabState::Done;
                        let h = r.headline.clone();
                        view! {
                            <tr>
                                <td>
                                    <input type="checkbox" disabled=!done
                                        aria-label=format!("Compare run {id}: {}", r.label)
                                        prop:checked=move || chosen.read().contains(&id)
                                        on:change=move |ev| toggle(id, event_target_checked(&ev)) />
                                </td>
                                <td><a href=format!("/lab/{id}")>{r.label.clone()}</a></td>
                                <td>{r.parameters.clone()}</td>
                                <td class="num">{h.as_ref().map(|h| h.gpus.to_string())}</td>
                                <td class="num">{h.as_ref().map(|h| h.workloads.to_string())}</td>
                                <td class="num">{h.as_ref().map(|h| h.debug_p90_s.map(wait).join(" / "))}</td>
                                <td class="num">{h.as_ref().map(|h| h.worst_team.map(ratio).join(" / "))}</td>
                                <td>{format!("{}, {}", r.requested_by, moment(r.requested_at, now_s()))}</td>
                                <td>{r.state.as_str()}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <p role="status">
                {move || match chosen.read().as_slice() {
                    [a, b] => {
                        let (a, b) = ((*a).min(*b), (*a).max(*b));
                        view! { <a class="button" href=format!("/lab/compare/{a}/{b}")>{format!("Compare runs {a} and {b}")}</a> }.into_any()
                    }
                    [] | [_] => view! { <span class="hint">"Select two finished runs to compare them."</span> }.into_any(),
                    _ => view! { <span class="hint">"Select only two runs to compare."</span> }.into_any(),
                }}
            </p>
        </section>
    }
}

/// Two finished runs side by side: their settings, every measure under the three policies, and
/// each team's delivered ÷ owed.
#[component]
pub fn LabComparePage() -> impl IntoView {
    let params = use_params_map();
    let ids = move || {
        let p = params.read();
        let get = |k: &str| p.get(k).and_then(|s| s.parse::<u64>().ok());
        (get("a"), get("b"))
    };
    let runs = Resource::new(ids, |(a, b)| async move {
        match (a, b) {
            (Some(a), Some(b)) => Ok((get_lab_run(a).await?, get_lab_run(b).await?)),
            _ => Err(AppError::NotFound("Choose two lab runs to compare.".into())),
        }
    });
    view! {
        <Title text="Compare lab runs" />
        <p class="no-print"><a href="/lab">"← Simulator lab"</a></p>
        <h1>"Compare lab runs"</h1>
        <Suspense fallback=|| view! { <p class="loading">"Loading both runs…"</p> }>
            {move || Suspend::new(async move {
                match runs.await {
                    Ok((a, b)) => match (a.result.clone(), b.result.clone()) {
                        (Some(ra), Some(rb)) => view! { <Comparison a b ra rb /> }.into_any(),
                        _ => view! { <p class="form-error" role="alert">"Both runs must have finished to be compared."</p> }.into_any(),
                    },
                    Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Comparison(a: LabRunView, b: LabRunView, ra: LabResult, rb: LabResult) -> impl IntoView {
    let name = |r: &LabRunView| format!("Run {}", r.id);
    let (na, nb) = (name(&a), name(&b));
    let measure_b = |label: &str| rb.measures.iter().find(|m| m.label == label).cloned();
    let rows: Vec<_> = ra
        .measures
        .iter()
        .map(|m| (m.clone(), measure_b(&m.label)))
        .collect();
    let mut teams: Vec<String> = ra.teams.iter().map(|t| t.path.clone()).collect();
    for t in &rb.teams {
        if !teams.contains(&t.path) {
            teams.push(t.path.clone());
        }
    }
    let team = |r: &LabResult, path: &str, i: usize| {
        pct(r
            .teams
            .iter()
            .find(|t| t.path == path)
            .and_then(|t| t.delivered_over_owed[i]))
    };
    view! {
        <div class="card table-wrap">
            <table class="table">
                <caption>"What was simulated"</caption>
                <thead><tr><th scope="col">""</th><th scope="col">{na.clone()}</th><th scope="col">{nb.clone()}</th></tr></thead>
                <tbody>
                    <tr><th scope="row">"Input"</th><td><a href=format!("/lab/{}", a.id)>{a.label.clone()}</a></td><td><a href=format!("/lab/{}", b.id)>{b.label.clone()}</a></td></tr>
                    <tr><th scope="row">"Settings"</th><td>{a.parameters.clone()}</td><td>{b.parameters.clone()}</td></tr>
                    <tr><th scope="row">"Cluster"</th>
                        <td>{format!("{} GPUs in {} hosts", ra.gpus, ra.hosts)}</td>
                        <td>{format!("{} GPUs in {} hosts", rb.gpus, rb.hosts)}</td></tr>
                    <tr><th scope="row">"Workloads"</th>
                        <td>{format!("{} over {}", ra.workloads, duration(ra.horizon_s))}</td>
                        <td>{format!("{} over {}", rb.workloads, duration(rb.horizon_s))}</td></tr>
                </tbody>
            </table>
        </div>
        <div class="card table-wrap">
            <table class="table lab-summary">
                <caption>"Each measure under the three policies in both runs"</caption>
                <TwoRunsHead first="Measure" a=na.clone() b=nb.clone() />
                <tbody>
                    {rows.into_iter().map(|(m, other)| view! {
                        <tr class:detail=m.detail>
                            <th scope="row">{m.label.clone()}</th>
                            <td class="num">{m.fair_share.clone()}</td>
                            <td class="num">{m.priority.clone()}</td>
                            <td class="num">{m.slurm.clone()}</td>
                            <td class="num">{other.as_ref().map(|o| o.fair_share.clone()).unwrap_or_else(|| "—".into())}</td>
                            <td class="num">{other.as_ref().map(|o| o.priority.clone()).unwrap_or_else(|| "—".into())}</td>
                            <td class="num">{other.as_ref().map(|o| o.slurm.clone()).unwrap_or_else(|| "—".into())}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        <div class="card table-wrap">
            <table class="table compact">
                <caption>"Delivered ÷ owed per team (a dash where a run has no such team)"</caption>
                <TwoRunsHead first="Team" a=na b=nb />
                <tbody>
                    {teams.into_iter().map(|path| view! {
                        <tr>
                            <th scope="row">{path.clone()}</th>
                            {[&ra, &rb].map(|r| [0, 1, 2].map(|i| view! { <td class="num">{team(r, &path, i)}</td> }))}
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// A table head with the three policies under each of two runs.
#[component]
fn TwoRunsHead(first: &'static str, a: String, b: String) -> impl IntoView {
    let policies = || POLICIES.map(|(_, name)| view! { <th scope="col" class="num">{name}</th> });
    view! {
        <thead>
            <tr>
                <th scope="col" rowspan="2">{first}</th>
                <th scope="colgroup" colspan="3">{a}</th>
                <th scope="colgroup" colspan="3">{b}</th>
            </tr>
            <tr>{policies()}{policies()}</tr>
        </thead>
    }
}

/// The three uploaded files' contents, read in the browser.
#[derive(Clone, Default)]
struct Uploads {
    tree: String,
    cluster: String,
    trace: String,
}

#[component]
fn LabFormView(philly: bool, philly_note: String) -> impl IntoView {
    let source = RwSignal::new("reference".to_string());
    let seed = RwSignal::new("1".to_string());
    let days = RwSignal::new("30".to_string());
    let window = RwSignal::new("7d".to_string());
    let max_min_runtime = RwSignal::new("8h".to_string());
    let uploads = RwSignal::new(Uploads::default());
    let reading = RwSignal::new(0u32);
    let start = Action::new(move |form: &LabForm| {
        let form = form.clone();
        async move { start_lab_run(form).await }
    });
    let error = Signal::derive(move || start.value().get().and_then(Result::err));
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(id)) = start.value().get() {
            navigate(&format!("/lab/{id}"), Default::default());
        }
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let u = uploads.get_untracked();
        start.dispatch(LabForm {
            source: source.get_untracked(),
            seed: seed.get_untracked(),
            days: days.get_untracked(),
            tree: u.tree,
            cluster: u.cluster,
            trace: u.trace,
            window: window.get_untracked(),
            max_min_runtime: max_min_runtime.get_untracked(),
        });
    };
    let describe = move |field: &'static str, id: &'static str| {
        move || error.get().and_then(|e| e.for_field(field)).map(|_| id)
    };
    let is = move |s: &'static str| move || source.get() == s;
    view! {
        <form class="card stack form-wide" on:submit=submit aria-labelledby="lab-form-heading">
            <h2 id="lab-form-heading">"New run"</h2>
            <FormError error />
            <fieldset aria-describedby=describe("source", "source-error")>
                <legend>"Input"</legend>
                <label class="choice">
                    <input type="radio" name="source" value="reference" checked=true on:change=move |_| source.set("reference".into()) />
                    <span>"Reference-like scenario: 1,024 GPUs, 15 teams under three programs, debug work at high priority, large free sweeps"</span>
                </label>
                <label class="choice">
                    <input type="radio" name="source" value="philly" disabled=!philly on:change=move |_| source.set("philly".into()) />
                    <span>"Philly trace (Microsoft, 2017)" <span class="hint">{philly_note}</span></span>
                </label>
                <label class="choice">
                    <input type="radio" name="source" value="upload" on:change=move |_| source.set("upload".into()) />
                    <span>"Upload a tree, a cluster and a trace (the formats of hourglass simulate)"</span>
                </label>
            </fieldset>
            <FieldError id="source-error" field="source" error />
            <div class="field-row" hidden=move || !is("reference")()>
                <div>
                    <label for="seed">"Seed"</label>
                    <input id="seed" inputmode="numeric" prop:value=seed on:input=move |ev| seed.set(event_target_value(&ev))
                        aria-describedby=describe("seed", "seed-error") />
                    <FieldError id="seed-error" field="seed" error />
                </div>
            </div>
            <div class="field-row" hidden=move || is("upload")()>
                <div>
                    <label for="days">"Days to simulate"</label>
                    <input id="days" inputmode="numeric" prop:value=days on:input=move |ev| days.set(event_target_value(&ev))
                        aria-describedby=describe("days", "days-error") />
                    <FieldError id="days-error" field="days" error />
                </div>
            </div>
            <div class="stack" hidden=move || !is("upload")()>
                <FileField id="tree" label="Budget tree (TOML)" accept=".toml,text/plain" uploads reading error
                    set=|u: &mut Uploads, text| u.tree = text />
                <FileField id="cluster" label="Cluster (TOML)" accept=".toml,text/plain" uploads reading error
                    set=|u: &mut Uploads, text| u.cluster = text />
                <FileField id="trace" label="Trace (CSV)" accept=".csv,text/csv,text/plain" uploads reading error
                    set=|u: &mut Uploads, text| u.trace = text />
            </div>
            <div class="field-row">
                <div>
                    <label for="window">"Usage lookback window"</label>
                    <input id="window" prop:value=window on:input=move |ev| window.set(event_target_value(&ev))
                        aria-describedby=describe("window", "window-error") />
                    <p id="window-hint" class="hint">"How far back usage counts, e.g. 7d."</p>
                    <FieldError id="window-error" field="window" error />
                </div>
                <div>
                    <label for="max_min_runtime">"Maximum minimum runtime"</label>
                    <input id="max_min_runtime" prop:value=max_min_runtime on:input=move |ev| max_min_runtime.set(event_target_value(&ev))
                        aria-describedby=describe("max_min_runtime", "max-min-runtime-error") />
                    <FieldError id="max-min-runtime-error" field="max_min_runtime" error />
                </div>
            </div>
            <button type="submit" disabled=move || { start.pending().get() || reading.get() > 0 }>
                {move || if start.pending().get() { "Preparing the input…" } else if reading.get() > 0 { "Reading files…" } else { "Run the three policies" }}
            </button>
        </form>
    }
}

/// A file input whose text is read in the browser into `uploads`.
#[component]
fn FileField(
    id: &'static str,
    label: &'static str,
    accept: &'static str,
    uploads: RwSignal<Uploads>,
    reading: RwSignal<u32>,
    error: Signal<Option<AppError>>,
    set: fn(&mut Uploads, String),
) -> impl IntoView {
    let error_id = match id {
        "tree" => "tree-error",
        "cluster" => "cluster-error",
        _ => "trace-error",
    };
    let on_change = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use web_sys::wasm_bindgen::JsCast;
            let file = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
                .and_then(|input| input.files())
                .and_then(|files| files.get(0));
            let Some(file) = file else {
                uploads.update(|u| set(u, String::new()));
                return;
            };
            reading.update(|n| *n += 1);
            leptos::task::spawn_local(async move {
                let text = wasm_bindgen_futures::JsFuture::from(file.text())
                    .await
                    .ok()
                    .and_then(|v| v.as_string())
                    .unwrap_or_default();
                uploads.update(|u| set(u, text));
                reading.update(|n| *n = n.saturating_sub(1));
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (ev, uploads, reading, set);
    };
    let described = move || error.get().and_then(|e| e.for_field(id)).map(|_| error_id);
    view! {
        <div>
            <label for=id>{label}</label>
            <input id=id type="file" accept=accept on:change=on_change aria-describedby=described />
            <FieldError id=error_id field=id error />
        </div>
    }
}

#[component]
pub fn LabRunPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|s| s.parse::<u64>().ok());
    let tick = RwSignal::new(0u32);
    let run = Resource::new(
        move || (id(), tick.get()),
        |(id, _)| async move {
            match id {
                Some(id) => get_lab_run(id).await,
                None => Err(AppError::NotFound("There is no such lab run.".into())),
            }
        },
    );
    view! {
        <Title text="Simulator lab run" />
        <ChartScript />
        <p class="no-print"><a href="/lab">"← Simulator lab"</a></p>
        <Transition fallback=|| view! { <p class="loading">"Loading the run…"</p> }>
            {move || Suspend::new(async move {
                match run.await {
                    Ok(r) => {
                        if r.state.is_open() {
                            poll(tick);
                        }
                        view! { <RunView run=r /> }.into_any()
                    }
                    Err(e) => view! { <h1>"Simulator lab run"</h1><p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// Asks for the run again in half a second (in the browser).
fn poll(tick: RwSignal<u32>) {
    #[cfg(feature = "hydrate")]
    set_timeout(
        move || {
            tick.try_update(|t| *t += 1);
        },
        std::time::Duration::from_millis(500),
    );
    #[cfg(not(feature = "hydrate"))]
    let _ = tick;
}

#[component]
fn RunView(run: LabRunView) -> impl IntoView {
    let heading = run.label.clone();
    let body = match (run.state, run.result.clone()) {
        (LabState::Done, Some(result)) => view! { <ResultView id=run.id result /> }.into_any(),
        (LabState::Failed, _) => view! {
            <p class="form-error" role="alert">{run.error.clone().unwrap_or_else(|| "The run failed.".into())}</p>
        }
        .into_any(),
        _ => view! {
            <section class="card" aria-labelledby="progress-label">
                <p id="progress-label" role="status">
                    {format!("{}… (step {} of {}, {:.0} s)", run.stage, run.step + 1, run.steps, run.elapsed_s)}
                </p>
                <progress max=run.steps value=run.step aria-labelledby="progress-label"></progress>
            </section>
        }
        .into_any(),
    };
    view! {
        <h1>{heading}</h1>
        <p class="lede">{format!("Requested by {}; {}. ", run.requested_by, run.parameters)}
            {(run.state == LabState::Done).then(|| format!("The three policies simulated in {:.1} s.", run.elapsed_s))}
        </p>
        {body}
    }
}

#[component]
fn ResultView(id: u64, result: LabResult) -> impl IntoView {
    let LabResult {
        gpus,
        hosts,
        horizon_s,
        workloads,
        measures,
        waits,
        teams,
    } = result;
    let wait = duration_or_dash;
    view! {
        <p>{format!(
            "{} workloads on {} GPUs in {} hosts over {}.",
            workloads, gpus, hosts, duration(horizon_s)
        )}</p>
        <div class="card table-wrap">
            <table class="table lab-summary">
                <caption>"Summary: each measure under the three policies, and whether fair share does better"</caption>
                <thead><tr>
                    <th scope="col">"Measure"</th><th scope="col" class="num">"Fair share"</th>
                    <th scope="col" class="num">"Priority baseline"</th><th scope="col" class="num">"SLURM peer"</th>
                    <th scope="col">"Against the baseline"</th><th scope="col">"Against SLURM"</th>
                </tr></thead>
                <tbody>
                    {measures.into_iter().map(|m| view! {
                        <tr class:detail=m.detail>
                            <th scope="row">{m.label}</th>
                            <td class="num">{m.fair_share}</td>
                            <td class="num">{m.priority}</td>
                            <td class="num">{m.slurm}</td>
                            <td class="verdict">{m.verdict}</td>
                            <td class="verdict">{m.verdict_slurm}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        <div class="charts">
            <section class="card chart-card" aria-labelledby="waits-heading">
                <h2 id="waits-heading">"Wait distributions"</h2>
                <WaitsChart rows=waits.clone() id=format!("lab-waits-{id}") />
                <table class="table compact">
                    <thead><tr><th scope="col">"Workloads"</th><th scope="col">"Policy"</th><th scope="col" class="num">"n"</th><th scope="col" class="num">"p50"</th><th scope="col" class="num">"p90"</th><th scope="col" class="num">"p99"</th></tr></thead>
                    <tbody>
                        {waits.into_iter().map(|w| view! {
                            <tr>
                                <td>{w.class}</td>
                                <td>{policy_label(&w.policy)}</td>
                                <td class="num">{w.count}</td>
                                <td class="num">{wait(w.p50_s)}</td>
                                <td class="num">{wait(w.p90_s)}</td>
                                <td class="num">{wait(w.p99_s)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
            <section class="card chart-card" aria-labelledby="teams-heading">
                <h2 id="teams-heading">"Delivered / owed per team"</h2>
                <TeamsChart rows=teams.clone() id=format!("lab-teams-{id}") />
                <table class="table compact">
                    <thead><tr><th scope="col">"Team"</th><th scope="col" class="num">"Share"</th><th scope="col" class="num">"Owed GPU-h"</th><th scope="col" class="num">"Fair share"</th><th scope="col" class="num">"Baseline"</th><th scope="col" class="num">"SLURM"</th></tr></thead>
                    <tbody>
                        {teams.into_iter().map(|t| view! {
                            <tr>
                                <th scope="row">{t.path}</th>
                                <td class="num">{format!("{:.1}%", t.fraction * 100.0)}</td>
                                <td class="num">{format!("{:.0}", t.owed_gpu_h[0])}</td>
                                <td class="num">{pct(t.delivered_over_owed[0])}</td>
                                <td class="num">{pct(t.delivered_over_owed[1])}</td>
                                <td class="num">{pct(t.delivered_over_owed[2])}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        </div>
        <section class="card" aria-labelledby="gantt-heading">
            <h2 id="gantt-heading">"Runs per GPU"</h2>
            <GanttChart id horizon_s gpus />
        </section>
    }
}
