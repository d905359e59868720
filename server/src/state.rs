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
    /// People's submissions and cancels, the token check of an API request that changes
    /// something included ([`crate::db::connect_writes`]): a crowd of readers holding every
    /// `pool` connection never delays a submission, and with it the start of a debug workload.
    #[from_ref(skip)]
    pub writes_pool: AnyPool,
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

impl AppState {
    /// The pool a person's request of this method reads from: requests that change something
    /// (anything but `GET` and `HEAD`) use the writes pool.
    pub fn people_pool(&self, method: &axum::http::Method) -> &AnyPool {
        if method == axum::http::Method::GET || method == axum::http::Method::HEAD {
            &self.pool
        } else {
            &self.writes_pool
        }
    }
}
