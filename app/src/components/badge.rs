//! Small labels people scan for.

use crate::workloads::WorkloadState;
use leptos::prelude::*;

/// A workload's state as a coloured label.
#[component]
pub fn StateBadge(state: WorkloadState) -> impl IntoView {
    let class = format!("state state-{state}");
    view! { <span class=class>{state.as_str()}</span> }
}
