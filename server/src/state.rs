use crate::{db::SessionStore, runtime::Runtime};
use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;
use sqlx::AnyPool;

/// Everything a request handler may need. Cloned per request; every field is cheap to clone.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: AnyPool,
    /// The agents' syncs and the scheduler's own connections to the same database
    /// ([`crate::db::connect_control`]): page renders holding every `pool` connection never
    /// delay a node's heartbeat or a scheduling pass.
    #[from_ref(skip)]
    pub control_pool: AnyPool,
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
    /// What Prometheus must send to read `/metrics` (`None`: open).
    #[from_ref(skip)]
    pub metrics_token: Option<String>,
}
