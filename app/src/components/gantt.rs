//! The lab's Gantt chart, drawn as SVG: one row per GPU, one bar per run coloured by team, solid
//! while the run was protected and hatched where it could be interrupted, with a red right edge
//! where it was preempted. Two chosen policies are drawn next to each other on the same GPUs and
//! window, as the reference's figure does. Zoom and pan re-fetch only the visible window.

use crate::lab::{api::lab_gantt, policy_label, Gantt, POLICIES};
use leptos::prelude::*;

/// Team colours, cycled (colour-blind-aware Tableau 10, then lighter variants).
const PALETTE: [&str; 20] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#8cd17d", "#ff9d9a", "#86bcb6", "#f1ce63",
    "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e",
];

const WIDTH: f64 = 1000.0;
const LABELS: f64 = 150.0;
const ROW: f64 = 14.0;
const AXIS: f64 = 22.0;

/// The shortest window one can zoom to, in seconds.
const MIN_SPAN: i64 = 600;

pub fn team_colour(team: u32) -> &'static str {
    PALETTE[team as usize % PALETTE.len()]
}

/// `d3 14:00`: a time in the simulation, counted from its start.
fn sim_time(t: i64) -> String {
    format!(
        "d{} {:02}:{:02}",
        t / 86_400,
        t % 86_400 / 3_600,
        t % 3_600 / 60
    )
}

#[component]
pub fn GanttChart(id: u64, horizon_s: i64, gpus: u32) -> impl IntoView {
    let left = RwSignal::new("fair-share".to_string());
    let right = RwSignal::new("slurm".to_string());
    let rows = RwSignal::new(gpus.min(32));
    // The visible window: the whole run when it is short, else its first day.
    let first = if horizon_s <= 2 * 86_400 {
        horizon_s
    } else {
        86_400
    };
    let window = RwSignal::new((0, first));
    let chart = move |policy: RwSignal<String>| {
        Resource::new(
            move || (policy.get(), rows.get(), window.get()),
            move |(p, n, (from, to))| lab_gantt(id, p, n, from, to),
        )
    };
    let (left_data, right_data) = (chart(left), chart(right));
    let zoom = move |factor: f64| {
        window.update(|(from, to)| {
            let centre = (*from + *to) / 2;
            let span =
                (((*to - *from) as f64 * factor) as i64).clamp(MIN_SPAN, horizon_s.max(MIN_SPAN));
            let start = (centre - span / 2).clamp(0, (horizon_s - span).max(0));
            *from = start;
            *to = (start + span).min(horizon_s);
        })
    };
    let pan = move |direction: i64| {
        window.update(|(from, to)| {
            let span = *to - *from;
            let start = (*from + direction * span / 2).clamp(0, (horizon_s - span).max(0));
            *from = start;
            *to = start + span;
        })
    };
    let options: Vec<u32> = [16u32, 32, 64, 128, 256]
        .into_iter()
        .filter(|n| *n <= gpus)
        .chain((gpus < 256 && ![16, 32, 64, 128].contains(&gpus)).then_some(gpus))
        .collect();
    view! {
        <div class="gantt-controls no-print" role="group" aria-label="Gantt chart controls">
            <PolicyChoice id="gantt-policy" label="Left" chosen=left />
            <PolicyChoice id="gantt-policy-right" label="Right" chosen=right />
            <label for="gantt-rows">"GPUs shown"</label>
            <select id="gantt-rows" on:change=move |ev| rows.set(event_target_value(&ev).parse().unwrap_or(32))>
                {options.into_iter().map(|n| view! { <option value=n.to_string() selected=n == gpus.min(32)>{format!("first {n}")}</option> }).collect_view()}
            </select>
            <button type="button" class="button-quiet" on:click=move |_| zoom(0.5)>"Zoom in"</button>
            <button type="button" class="button-quiet" on:click=move |_| zoom(2.0)>"Zoom out"</button>
            <button type="button" class="button-quiet" aria-label="Earlier" on:click=move |_| pan(-1)>"◀ Earlier"</button>
            <button type="button" class="button-quiet" aria-label="Later" on:click=move |_| pan(1)>"Later ▶"</button>
            <button type="button" class="button-quiet" on:click=move |_| window.set((0, horizon_s))>"Whole run"</button>
            <span class="gantt-window" aria-live="polite">
                {move || { let (f, t) = window.get(); format!("Showing {} to {}", sim_time(f), sim_time(t)) }}
            </span>
        </div>
        <div class="gantt-pair">
            {[("left", left_data), ("right", right_data)].map(|(side, data)| view! {
                <Transition fallback=|| view! { <p class="loading">"Loading the chart…"</p> }>
                    {move || Suspend::new(async move {
                        match data.await {
                            Ok(g) => view! { <GanttSvg gantt=g side /> }.into_any(),
                            Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        }
                    })}
                </Transition>
            })}
        </div>
    }
}

/// A menu of the lab's policies for one of the two charts.
#[component]
fn PolicyChoice(id: &'static str, label: &'static str, chosen: RwSignal<String>) -> impl IntoView {
    view! {
        <label for=id>{label}</label>
        <select id=id on:change=move |ev| chosen.set(event_target_value(&ev))>
            {POLICIES.map(|(value, name)| view! {
                <option value=value selected=move || *chosen.read() == value>{name}</option>
            })}
        </select>
    }
}

/// One chart; `side` keeps its hatch patterns' ids apart from the other chart's.
#[component]
fn GanttSvg(gantt: Gantt, side: &'static str) -> impl IntoView {
    let height = gantt.rows.len() as f64 * ROW + AXIS;
    let span = (gantt.to - gantt.from).max(1) as f64;
    let x = move |t: i64| LABELS + (t - gantt.from) as f64 / span * (WIDTH - LABELS);
    let ticks: Vec<i64> = (0..=5)
        .map(|k| gantt.from + (gantt.to - gantt.from) * k / 5)
        .collect();
    let preempted = gantt.bars.iter().filter(|b| b.preempted).count();
    let label = format!(
        "Runs on the first {} GPUs under {}, {} to {}: {} bars, {} ending in a preemption.",
        gantt.rows.len(),
        match gantt.policy.as_str() {
            "fair-share" => "fair share",
            "priority" => "the priority baseline",
            "slurm" => "the SLURM peer",
            other => policy_label(other),
        },
        sim_time(gantt.from),
        sim_time(gantt.to),
        gantt.bars.len(),
        preempted
    );
    let teams = gantt.teams.clone();
    let used: std::collections::BTreeSet<u32> = gantt.bars.iter().map(|b| b.team).collect();
    view! {
        <figure class="gantt">
            <h3 class="gantt-title">{policy_label(&gantt.policy)}</h3>
            <svg viewBox=format!("0 0 {WIDTH} {height}") role="img" aria-label=label.clone() preserveAspectRatio="none"
                style=format!("height: {}px", height.max(60.0))>
                <defs>
                    {teams.iter().enumerate().map(|(i, _)| view! {
                        <pattern id=format!("hatch-{side}-{i}") patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">
                            <rect width="6" height="6" fill=team_colour(i as u32) opacity="0.45" />
                            <line x1="0" y1="0" x2="0" y2="6" stroke=team_colour(i as u32) stroke-width="3" />
                        </pattern>
                    }).collect_view()}
                </defs>
                {gantt.rows.iter().enumerate().map(|(i, name)| view! {
                    <text class="gantt-label" x=LABELS - 6.0 y=i as f64 * ROW + ROW * 0.75 text-anchor="end">{name.clone()}</text>
                }).collect_view()}
                {ticks.iter().map(|t| view! {
                    <line class="gantt-tick" x1=x(*t) x2=x(*t) y1="0" y2=height - AXIS + 4.0 />
                    <text class="gantt-label" x=x(*t) y=height - 6.0 text-anchor="middle">{sim_time(*t)}</text>
                }).collect_view()}
                {gantt.bars.iter().map(|b| {
                    let y = b.row as f64 * ROW + 1.0;
                    let (x0, x1) = (x(b.start), x(b.end).max(x(b.start) + 0.5));
                    let solid_end = match b.protected_until {
                        Some(p) if b.allocated => x(p.clamp(b.start, b.end)),
                        _ => x0,
                    };
                    let team = teams.get(b.team as usize).cloned().unwrap_or_default();
                    let title = format!(
                        "{} ({team}{}) {}–{}{}",
                        b.workload,
                        if b.allocated { "" } else { ", free" },
                        sim_time(b.start),
                        sim_time(b.end),
                        if b.preempted { ", preempted" } else { "" }
                    );
                    view! {
                        <g class="gantt-bar" data-team=team.clone()>
                            <title>{title}</title>
                            <rect x=x0 y=y width=(solid_end - x0).max(0.0) height=ROW - 2.0 fill=team_colour(b.team) />
                            <rect class="gantt-hatched" x=solid_end y=y width=(x1 - solid_end).max(0.0) height=ROW - 2.0
                                fill=format!("url(#hatch-{side}-{})", b.team) />
                            {b.preempted.then(|| view! {
                                <rect class="gantt-preempted" x=x1 - 2.0 y=y width="2" height=ROW - 2.0 fill="#d0021b" />
                            })}
                        </g>
                    }
                }).collect_view()}
            </svg>
            <figcaption>
                {label}
                <ul class="gantt-legend">
                    {used.into_iter().map(|t| view! {
                        <li><span class="swatch" style=format!("background: {}", team_colour(t))></span>{teams.get(t as usize).cloned().unwrap_or_default()}</li>
                    }).collect_view()}
                    <li><span class="swatch swatch-hatched"></span>"hatched: interruptible (free, or past its minimum runtime)"</li>
                    <li><span class="swatch swatch-preempted"></span>"red edge: preempted or drained"</li>
                </ul>
                {gantt.bars.is_empty().then(|| view! { <p class="empty">"Nothing ran on these GPUs in this window."</p> })}
            </figcaption>
        </figure>
    }
}
