//! The ECharts interop (in the browser only): wait for the script and the element, render,
//! dispose.

use super::{build, Ink, Plot};
use charming::{theme::Theme, Echarts, WasmRenderer};
use leptos::prelude::*;
use std::time::Duration;
use web_sys::js_sys::{Function, Reflect};
use web_sys::wasm_bindgen::{JsCast, JsValue};

/// How long to wait for ECharts and the element, in 50 ms steps (the script loads
/// asynchronously after a client-side navigation).
const TRIES: u32 = 400;

pub fn when_ready(
    id: String,
    height: u32,
    plot: Plot,
    drawn: RwSignal<Option<bool>>,
    chart: StoredValue<Option<Echarts>, LocalStorage>,
    tries: u32,
) {
    if drawn.try_get_untracked().is_none() {
        // The chart left the page.
        return;
    }
    let Some(window) = web_sys::window() else {
        return;
    };
    let ready = Reflect::has(&window, &JsValue::from_str("echarts")).unwrap_or(false);
    // After a client-side change the new element may not be in the document yet.
    let element = window.document().and_then(|d| d.get_element_by_id(&id));
    let Some(element) = element.filter(|_| ready) else {
        if tries < TRIES {
            set_timeout(
                move || when_ready(id, height, plot, drawn, chart, tries + 1),
                Duration::from_millis(50),
            );
        } else {
            leptos::logging::error!("echarts or #{id} missing; chart not drawn");
            drawn.try_set(Some(false));
        }
        return;
    };
    let width = u32::try_from(element.client_width()).unwrap_or(0).max(280);
    let dark = window
        .match_media("(prefers-color-scheme: dark)")
        .ok()
        .flatten()
        .is_some_and(|query| query.matches());
    let theme = if dark { Theme::Dark } else { Theme::Default };
    match WasmRenderer::new(width, height)
        .theme(theme)
        .render(&id, &build(&plot, Ink::new(dark)))
    {
        Ok(instance) => {
            if let Some(Some(old)) = chart.try_update_value(|c| c.replace(instance)) {
                dispose(&old);
            }
            drawn.try_set(Some(true));
        }
        Err(error) => {
            leptos::logging::error!("chart {id}: {error:?}");
            drawn.try_set(Some(false));
        }
    }
}

/// Frees an ECharts instance (its canvas and listeners).
pub fn dispose(instance: &Echarts) {
    let this: &JsValue = instance.as_ref();
    if let Ok(f) = Reflect::get(this, &JsValue::from_str("dispose")) {
        if let Some(f) = f.dyn_ref::<Function>() {
            let _ = f.call0(this);
        }
    }
}
