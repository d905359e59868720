use crate::{db::SessionStore, runtime::Runtime};
use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use sqlx::AnyPool;

/// Everything a request handler may need. Cloned per request; every field is cheap to clone.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: AnyPool,
    /// Where sessions are kept (the same database, through the engine's own sqlx store).
    pub sessions: SessionStore,
    /// Send the session cookie with `Secure` (the site is served over HTTPS).
    pub secure_cookies: bool,
    /// The scheduler runtime (woken by submissions, cancels, agent reports, admin actions).
    pub runtime: Runtime,
    /// The simulator lab's runs (in memory).
    pub lab: crate::lab::Lab,
    /// Which proxies to believe about the client, and the site's public origin.
    pub proxy: std::sync::Arc<crate::guard::client::ProxySettings>,
}
