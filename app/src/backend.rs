//! The seam between server functions and the server: a trait the `server` crate implements and
//! provides as context, so pages' server functions run the same services as the CLI and JSON API.

#[cfg(feature = "ssr")]
pub use ssr::*;

#[cfg(feature = "ssr")]
mod ssr {
    use crate::{
        budget::{ChangeRequestView, ImpactView, ProposalInput, TreeNodeView},
        error::AppError,
        model::{CurrentUser, NewUser, UserSummary},
        nodes::{NodeView, RegisteredNode},
        settings::{SettingsForm, SettingsView},
        tokens::TokenView,
        workloads::{QueueView, SubmitForm, SubmitOptions, WorkloadDetail, WorkloadView},
    };
    use leptos::prelude::*;
    use std::sync::Arc;

    /// Services the UI needs. Every method that acts on behalf of someone takes the `actor` and
    /// enforces authorization itself: hiding a button is never the only guard.
    #[async_trait::async_trait]
    pub trait Backend: Send + Sync + 'static {
        /// The server's time in seconds since the epoch: what pages render "now" as.
        fn now(&self) -> i64;

        async fn list_users(&self, actor: &CurrentUser) -> Result<Vec<UserSummary>, AppError>;
        async fn create_user(
            &self,
            actor: &CurrentUser,
            input: NewUser,
        ) -> Result<UserSummary, AppError>;
        async fn set_user_disabled(
            &self,
            actor: &CurrentUser,
            user_id: i64,
            disabled: bool,
        ) -> Result<UserSummary, AppError>;
        async fn set_user_role(
            &self,
            actor: &CurrentUser,
            user_id: i64,
            role: String,
        ) -> Result<UserSummary, AppError>;

        async fn submit_choices(&self, actor: &CurrentUser) -> Result<SubmitOptions, AppError>;
        async fn submit_workload(
            &self,
            actor: &CurrentUser,
            form: SubmitForm,
        ) -> Result<WorkloadView, AppError>;
        async fn list_workloads(
            &self,
            actor: &CurrentUser,
            mine: bool,
            state: Option<String>,
        ) -> Result<Vec<WorkloadView>, AppError>;
        async fn workload_detail(
            &self,
            actor: &CurrentUser,
            id: i64,
        ) -> Result<WorkloadDetail, AppError>;
        async fn cancel_workload(
            &self,
            actor: &CurrentUser,
            id: i64,
        ) -> Result<WorkloadView, AppError>;
        async fn queue(
            &self,
            actor: &CurrentUser,
            limit: usize,
            cluster: String,
        ) -> Result<QueueView, AppError>;
        async fn nodes(&self, actor: &CurrentUser) -> Result<Vec<NodeView>, AppError>;
        async fn node_action(
            &self,
            actor: &CurrentUser,
            name: String,
            action: String,
        ) -> Result<(), AppError>;
        async fn register_node(
            &self,
            actor: &CurrentUser,
            name: String,
            cluster: String,
        ) -> Result<RegisteredNode, AppError>;
        async fn clusters(
            &self,
            actor: &CurrentUser,
        ) -> Result<Vec<crate::nodes::ClusterSummary>, AppError>;
        async fn remove_node(&self, actor: &CurrentUser, name: String) -> Result<(), AppError>;
        async fn list_tokens(&self, actor: &CurrentUser) -> Result<Vec<TokenView>, AppError>;
        async fn create_token(&self, actor: &CurrentUser, name: String)
            -> Result<String, AppError>;
        async fn revoke_token(&self, actor: &CurrentUser, id: i64) -> Result<(), AppError>;
        async fn settings(&self, actor: &CurrentUser) -> Result<SettingsView, AppError>;
        async fn update_settings(
            &self,
            actor: &CurrentUser,
            form: SettingsForm,
        ) -> Result<SettingsView, AppError>;

        async fn tree(
            &self,
            actor: &CurrentUser,
            cluster: String,
        ) -> Result<Vec<TreeNodeView>, AppError>;
        /// What the navigation counts for `actor`: requests waiting for them, unread notifications.
        async fn nav_counts(
            &self,
            actor: &CurrentUser,
        ) -> Result<crate::inbox::NavCounts, AppError>;
        /// A tree node's share history.
        async fn share_history(
            &self,
            actor: &CurrentUser,
            path: String,
        ) -> Result<crate::budget::shares::ShareHistory, AppError>;
        /// The outgoing webhook (admins only).
        async fn webhook(
            &self,
            actor: &CurrentUser,
        ) -> Result<crate::settings::webhook::WebhookView, AppError>;
        async fn set_webhook(
            &self,
            actor: &CurrentUser,
            url: String,
            reason: Option<String>,
        ) -> Result<crate::settings::webhook::WebhookView, AppError>;
        async fn test_webhook(
            &self,
            actor: &CurrentUser,
        ) -> Result<crate::settings::webhook::WebhookView, AppError>;
        /// `actor`'s notifications.
        async fn inbox(&self, actor: &CurrentUser) -> Result<crate::inbox::Inbox, AppError>;
        /// Marks `actor`'s notifications so far as read.
        async fn mark_inbox_read(&self, actor: &CurrentUser) -> Result<(), AppError>;
        /// Whether the database is the demo's (anyone may ask, signed in or not).
        async fn demo_mode(&self) -> Result<bool, AppError>;
        /// A tree node's owners, members and their history.
        async fn node_people(
            &self,
            actor: &CurrentUser,
            path: String,
        ) -> Result<crate::budget::people::NodePeople, AppError>;
        /// Adds or removes `username` as a member or owner of `path`.
        async fn change_grant(
            &self,
            actor: &CurrentUser,
            kind: crate::budget::people::GrantKind,
            path: String,
            username: String,
            add: bool,
        ) -> Result<crate::budget::people::NodePeople, AppError>;
        async fn propose_change(
            &self,
            actor: &CurrentUser,
            input: ProposalInput,
        ) -> Result<ChangeRequestView, AppError>;
        async fn change_requests(
            &self,
            actor: &CurrentUser,
            scope: String,
            node: Option<String>,
        ) -> Result<Vec<ChangeRequestView>, AppError>;
        async fn decide_change(
            &self,
            actor: &CurrentUser,
            id: i64,
            approve: bool,
            comment: String,
        ) -> Result<ChangeRequestView, AppError>;
        async fn change_impact(&self, actor: &CurrentUser, id: i64)
            -> Result<ImpactView, AppError>;
        /// The proposer takes a waiting request back.
        async fn withdraw_change(
            &self,
            actor: &CurrentUser,
            id: i64,
        ) -> Result<ChangeRequestView, AppError>;
        /// The proposer re-proposes a stale request on today's shares; returns the new request.
        async fn rebase_change(
            &self,
            actor: &CurrentUser,
            id: i64,
        ) -> Result<ChangeRequestView, AppError>;
        /// The review of fiscal `year` quarter `quarter` (this one without them); with each
        /// cluster's headline too when `each_cluster` (the Reports page; the Overview needs only
        /// the total).
        async fn quarterly_review(
            &self,
            actor: &CurrentUser,
            year: Option<i32>,
            quarter: Option<u32>,
            each_cluster: bool,
        ) -> Result<crate::reports::Review, AppError>;
        /// The last quarters up to fiscal `year` quarter `quarter` (this one without them).
        async fn trend(
            &self,
            actor: &CurrentUser,
            year: Option<i32>,
            quarter: Option<u32>,
        ) -> Result<crate::reports::Trend, AppError>;
        /// Who used `path`'s GPUs over `[from, to)`.
        async fn people_usage(
            &self,
            actor: &CurrentUser,
            path: String,
            from: i64,
            to: i64,
        ) -> Result<Vec<crate::reports::PersonUsage>, AppError>;
        /// The review of the days `from` to `to` (`2026-10-01`, both included).
        async fn period_review(
            &self,
            actor: &CurrentUser,
            from: String,
            to: String,
            each_cluster: bool,
        ) -> Result<crate::reports::Review, AppError>;
        /// On `cluster` alone, or on every cluster together when it is empty.
        async fn usage_series(
            &self,
            actor: &CurrentUser,
            node: String,
            cluster: String,
            from: i64,
            to: i64,
            granularity: String,
        ) -> Result<crate::reports::UsageSeries, AppError>;

        async fn cluster_activity(
            &self,
            actor: &CurrentUser,
            from: i64,
            to: i64,
            granularity: String,
        ) -> Result<crate::reports::ClusterActivity, AppError>;

        async fn lab_sources(
            &self,
            actor: &CurrentUser,
        ) -> Result<crate::lab::LabSources, AppError>;
        async fn start_lab_run(
            &self,
            actor: &CurrentUser,
            form: crate::lab::LabForm,
        ) -> Result<u64, AppError>;
        async fn lab_run(
            &self,
            actor: &CurrentUser,
            id: u64,
        ) -> Result<crate::lab::LabRunView, AppError>;
        async fn lab_runs(
            &self,
            actor: &CurrentUser,
        ) -> Result<Vec<crate::lab::LabRunView>, AppError>;
        async fn lab_gantt(
            &self,
            actor: &CurrentUser,
            id: u64,
            policy: String,
            gpus: u32,
            from: i64,
            to: i64,
        ) -> Result<crate::lab::Gantt, AppError>;
    }

    /// How the backend travels in Leptos context.
    pub type SharedBackend = Arc<dyn Backend>;

    /// The backend the server provided for this request.
    pub fn backend() -> Result<SharedBackend, AppError> {
        use_context::<SharedBackend>().ok_or_else(|| {
            leptos::logging::error!("no Backend in context: the server must provide one");
            AppError::Internal
        })
    }

    /// The signed-in user of this request, placed in the request's extensions by the server.
    pub fn request_user() -> Option<CurrentUser> {
        use_context::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<CurrentUser>().cloned())
    }

    /// The signed-in user, or [`AppError::Unauthenticated`].
    pub fn require_user() -> Result<CurrentUser, AppError> {
        request_user().ok_or(AppError::Unauthenticated)
    }

    /// Sets the HTTP status of the server function's response from its result, so scripts and
    /// tests see 403/422/… rather than a blanket 500.
    pub fn with_status<T>(result: Result<T, AppError>) -> Result<T, AppError> {
        if let Err(error) = &result {
            if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                if let Ok(status) = http::StatusCode::from_u16(error.status()) {
                    response.set_status(status);
                }
            }
        }
        result
    }
}
