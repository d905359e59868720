//! Small labels people scan for.

use leptos::prelude::*;

/// A workload's state as a coloured label.
#[component]
pub fn StateBadge(state: String) -> impl IntoView {
    let class = format!("state state-{state}");
    view! { <span class=class>{state}</span> }
}
