//! Live updates: a signal that ticks whenever the server says workloads changed (server-sent
//! events on `/api/v1/stream`). Pages use it as a resource source, so they refresh at once
//! without polling. It ticks too when the stream (re)connects: a change made between a page's
//! first read and the stream's opening, or while it was cut off, would otherwise never reach
//! the page (a workload that started just then stayed "queued" on its page).

use leptos::prelude::*;

/// A counter that changes on every server-side change. On the server it never changes.
pub fn use_live_updates() -> ReadSignal<u64> {
    let (tick, set_tick) = signal(0u64);
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::{closure::Closure, JsCast};
        Effect::new(move |_| {
            let Ok(source) = web_sys::EventSource::new("/api/v1/stream") else {
                return;
            };
            let on_change = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| {
                set_tick.update(|n| *n += 1);
            });
            let _ = source
                .add_event_listener_with_callback("changed", on_change.as_ref().unchecked_ref());
            on_change.forget();
            let on_open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
                set_tick.update(|n| *n += 1);
            });
            let _ =
                source.add_event_listener_with_callback("open", on_open.as_ref().unchecked_ref());
            on_open.forget();
            let source = send_wrapper::SendWrapper::new(source);
            on_cleanup(move || source.close());
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = set_tick;
    tick
}
