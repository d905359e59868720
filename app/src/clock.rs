//! The UI's clock: the one place the app reads the time. On the server a page is rendered at the
//! server's time (its [`Backend`](crate::backend::Backend) clock, settable in tests), so "5 min
//! ago" reads the same in the HTML and after hydration within a second; in the browser, the
//! browser's time ticks on from there.

/// Seconds since the epoch: the browser's clock once hydrated, the server's while rendering.
pub fn now_s() -> i64 {
    #[cfg(feature = "hydrate")]
    {
        (web_sys::js_sys::Date::now() / 1000.0) as i64
    }
    #[cfg(all(feature = "ssr", not(feature = "hydrate")))]
    {
        use leptos::prelude::use_context;
        match use_context::<crate::backend::SharedBackend>() {
            Some(backend) => backend.now(),
            None => system_now(),
        }
    }
    #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
    {
        system_now()
    }
}

/// Outside a request (no server in context): the machine's clock.
#[cfg(not(feature = "hydrate"))]
fn system_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
