//! A "Copy" button beside text people paste elsewhere (a node's agent command, a new token).

use leptos::prelude::*;

/// Copies `text` to the clipboard and says whether it worked. Where the browser refuses (a page
/// served over plain HTTP from another machine has no clipboard access), it says how to copy by
/// hand instead.
#[component]
pub fn CopyButton(
    /// What is copied.
    text: String,
    /// The button's accessible name, e.g. "Copy the agent command".
    #[prop(into)]
    label: String,
) -> impl IntoView {
    let status = RwSignal::new(None::<&'static str>);
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            const FAILED: &str = "The browser did not allow copying: select the text and copy it.";
            let Some(window) = web_sys::window() else {
                return;
            };
            let promise = window.navigator().clipboard().write_text(&text);
            wasm_bindgen_futures::spawn_local(async move {
                let copied = wasm_bindgen_futures::JsFuture::from(promise).await.is_ok();
                status.set(Some(if copied { "Copied." } else { FAILED }));
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = &text;
    };
    view! {
        <div class="copy">
            <button type="button" class="button-quiet" aria-label=label on:click=copy>"Copy"</button>
            <span class="hint" aria-live="polite">{move || status.get()}</span>
        </div>
    }
}
