//! The Budget tree's share-history panel: a node's shares over time, who proposed and approved
//! each, and a small chart of its effective share of the cluster.

use crate::{
    budget::shares::{share_history, ShareHistory},
    components::time::Moment,
};
use leptos::prelude::*;

#[component]
pub fn SharePanel(path: String, close: WriteSignal<Option<String>>) -> impl IntoView {
    let history = Resource::new(|| (), {
        let path = path.clone();
        move |_| share_history(path.clone())
    });
    let section = NodeRef::<leptos::html::Section>::new();
    Effect::new(move |_| {
        if let Some(s) = section.get() {
            s.scroll_into_view();
        }
    });
    view! {
        <section class="card" aria-labelledby="shares-panel-heading" node_ref=section>
            <div class="chart-head">
                <h2 id="shares-panel-heading">{format!("Share history of {path}")}</h2>
                <button type="button" class="button-quiet" on:click=move |_| close.set(None)>"Close"</button>
            </div>
            <Transition fallback=|| view! { <p class="loading">"Loading its history…"</p> }>
                {move || Suspend::new(async move {
                    match history.await {
                        Ok(h) => view! { <Versions history=h /> }.into_any(),
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Versions(history: ShareHistory) -> impl IntoView {
    let now = crate::clock::now_s();
    let pct = |f: f64| format!("{:.1}%", f * 100.0);
    let summary = match (history.fraction.first(), history.fraction.last()) {
        (Some(first), Some(last)) if history.fraction.len() > 1 => format!(
            "Its effective share of the cluster went from {} to {} in {}.",
            pct(first.1),
            pct(last.1),
            match history.fraction.len() - 1 {
                1 => "one change".to_string(),
                n => format!("{n} changes"),
            }
        ),
        (_, Some(last)) => format!(
            "Its effective share of the cluster has been {} throughout.",
            pct(last.1)
        ),
        _ => String::new(),
    };
    view! {
        <FractionSteps fraction=history.fraction.clone() now summary />
        <table class="table compact" aria-label="Share versions">
            <thead><tr><th scope="col">"From"</th><th scope="col">"Until"</th><th scope="col" class="num">"Share"</th><th scope="col">"How"</th></tr></thead>
            <tbody>
                {history.versions.into_iter().rev().map(|v| view! {
                    <tr>
                        <td><Moment at=v.from now /></td>
                        <td>{match v.to { Some(to) => view! { <Moment at=to now /> }.into_any(), None => "in force".into_any() }}</td>
                        <td class="num">{format!("{}", v.share)}</td>
                        <td>{match &v.cluster {
                            Some(c) => format!("on cluster {c} only: {}", v.origin.describe()),
                            None => v.origin.describe(),
                        }}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// The effective share as steps from its first version to now (plain SVG), its figures in words.
#[component]
fn FractionSteps(fraction: Vec<(i64, f64)>, now: i64, summary: String) -> impl IntoView {
    const W: f64 = 320.0;
    const H: f64 = 48.0;
    let start = fraction.first().map_or(now, |f| f.0);
    let span = now.saturating_sub(start).max(1) as f64;
    let top = fraction
        .iter()
        .map(|f| f.1)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let x = |t: i64| (t.saturating_sub(start) as f64 / span * W).clamp(0.0, W);
    let y = |f: f64| H - f / top * (H - 4.0);
    let mut points = Vec::new();
    for (i, &(t, f)) in fraction.iter().enumerate() {
        if i > 0 {
            points.push(format!("{:.1},{:.1}", x(t), y(fraction[i - 1].1)));
        }
        points.push(format!("{:.1},{:.1}", x(t), y(f)));
    }
    if let Some(&(_, f)) = fraction.last() {
        points.push(format!("{W:.1},{:.1}", y(f)));
    }
    view! {
        <figure class="share-steps">
            <svg viewBox=format!("0 0 {W} {H}") width=W height=H role="img" aria-label=summary.clone()>
                <polyline points=points.join(" ") fill="none" stroke="currentColor" stroke-width="2" />
            </svg>
            <figcaption>{summary}</figcaption>
        </figure>
    }
}
