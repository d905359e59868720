//! Collapsible tree tables (the Budget tree and the quarterly review share them).

use leptos::prelude::*;
use std::collections::BTreeSet;

/// Which subtrees of one table are collapsed, by path ("" is the root).
#[derive(Clone, Copy)]
pub struct Collapsed {
    paths: RwSignal<BTreeSet<String>>,
}

impl Collapsed {
    pub fn new() -> Collapsed {
        Collapsed {
            paths: RwSignal::new(BTreeSet::new()),
        }
    }

    /// Whether the row at `path` is hidden because an ancestor is collapsed.
    pub fn hides(self, path: &str) -> bool {
        self.paths.with(|c| {
            c.iter()
                .any(|p| p != path && (p.is_empty() || path.starts_with(&format!("{p}/"))))
        })
    }

    fn is_expanded(self, path: &str) -> bool {
        !self.paths.with(|c| c.contains(path))
    }

    fn toggle(self, path: &str) {
        self.paths.update(|c| {
            if !c.remove(path) {
                c.insert(path.to_string());
            }
        });
    }
}

impl Default for Collapsed {
    fn default() -> Self {
        Collapsed::new()
    }
}

/// The expand/collapse button of an inner node's row, or a bullet for a leaf.
#[component]
pub fn TreeToggle(collapsed: Collapsed, path: String, leaf: bool, label: String) -> impl IntoView {
    if leaf {
        return view! { <span class="tree-leaf" aria-hidden="true">"•"</span> }.into_any();
    }
    let expanded = {
        let path = path.clone();
        Signal::derive(move || collapsed.is_expanded(&path))
    };
    view! {
        <button type="button" class="tree-toggle" aria-expanded=move || expanded.get().to_string()
            aria-label=format!("Expand or collapse {label}")
            on:click=move |_| collapsed.toggle(&path)>
            {move || if expanded.get() { "▾" } else { "▸" }}
        </button>
    }
    .into_any()
}
