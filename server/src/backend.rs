//! The server's implementation of the UI's [`Backend`]: the services, with the actor's rights checked.

use crate::{
    budget::{self, changes, changes::Proposal},
    nodes::service as node_service,
    runtime::Runtime,
    settings,
    tokens::service as tokens,
    users::service,
    workloads::{domain::SubmitWorkload, repo as workload_repo, service as workloads},
    ServerError,
};
use app::{
    backend::Backend,
    budget::{ChangeRequestView, ImpactView, ProposalInput, TreeNodeView},
    error::AppError,
    model::{CurrentUser, NewUser, UserSummary},
    nodes::{NodeView, RegisteredNode},
    settings::{SettingsForm, SettingsView},
    tokens::TokenView,
    workloads::{QueueView, SubmitForm, SubmitOptions, WorkloadDetail, WorkloadView},
};
use sqlx::AnyPool;

pub struct ServerBackend {
    pool: AnyPool,
    runtime: Runtime,
    lab: crate::lab::Lab,
}

impl ServerBackend {
    pub fn new(pool: AnyPool, runtime: Runtime, lab: crate::lab::Lab) -> Self {
        ServerBackend { pool, runtime, lab }
    }
}

#[async_trait::async_trait]
impl Backend for ServerBackend {
    fn now(&self) -> i64 {
        self.runtime.now()
    }

    async fn cluster_activity(
        &self,
        _actor: &CurrentUser,
        from: i64,
        to: i64,
        granularity: String,
    ) -> Result<app::reports::ClusterActivity, AppError> {
        use crate::reports::{activity, usage};
        let parsed = usage::parse_granularity(&granularity)?;
        Ok(activity::activity(&self.pool, from, to, parsed, self.runtime.now()).await?)
    }

    async fn lab_sources(&self, actor: &CurrentUser) -> Result<app::lab::LabSources, AppError> {
        Ok(self.lab.sources(actor)?)
    }

    async fn start_lab_run(
        &self,
        actor: &CurrentUser,
        form: app::lab::LabForm,
    ) -> Result<u64, AppError> {
        Ok(self.lab.start(actor, form, self.runtime.now()).await?)
    }

    async fn lab_run(
        &self,
        actor: &CurrentUser,
        id: u64,
    ) -> Result<app::lab::LabRunView, AppError> {
        Ok(self.lab.run(actor, id)?)
    }

    async fn lab_runs(&self, actor: &CurrentUser) -> Result<Vec<app::lab::LabRunView>, AppError> {
        Ok(self.lab.runs(actor)?)
    }

    async fn lab_gantt(
        &self,
        actor: &CurrentUser,
        id: u64,
        policy: String,
        gpus: u32,
        from: i64,
        to: i64,
    ) -> Result<app::lab::Gantt, AppError> {
        Ok(self.lab.gantt(actor, id, &policy, gpus, from, to)?)
    }

    async fn list_users(&self, actor: &CurrentUser) -> Result<Vec<UserSummary>, AppError> {
        Ok(service::list_users(&self.pool, actor).await?)
    }

    async fn create_user(
        &self,
        actor: &CurrentUser,
        input: NewUser,
    ) -> Result<UserSummary, AppError> {
        service::require_admin(actor)?;
        let user = service::create_user(
            &self.pool,
            &input.username,
            &input.role,
            input.password,
            self.runtime.now(),
        )
        .await?;
        tracing::info!(actor = %actor.username, user = %user.username, role = %user.role, "user created");
        Ok(user)
    }

    async fn set_user_disabled(
        &self,
        actor: &CurrentUser,
        user_id: i64,
        disabled: bool,
    ) -> Result<UserSummary, AppError> {
        let user =
            service::set_disabled(&self.pool, actor, user_id, disabled, self.runtime.now()).await?;
        tracing::info!(actor = %actor.username, user = %user.username, disabled, "user access changed");
        Ok(user)
    }

    async fn set_user_role(
        &self,
        actor: &CurrentUser,
        user_id: i64,
        role: String,
    ) -> Result<UserSummary, AppError> {
        let user = service::set_role(&self.pool, actor, user_id, &role, self.runtime.now()).await?;
        tracing::info!(actor = %actor.username, user = %user.username, role = %user.role.as_str(), "user role changed");
        Ok(user)
    }

    async fn submit_choices(&self, actor: &CurrentUser) -> Result<SubmitOptions, AppError> {
        // The connection goes back before `my_projects` takes one: holding one while asking
        // for another deadlocks once every connection is held by a request doing the same.
        let clusters = {
            let mut db = self.pool.acquire().await.map_err(ServerError::from)?;
            crate::clusters::in_use(&mut db).await?
        };
        Ok(SubmitOptions {
            projects: workloads::my_projects(&self.pool, actor).await?,
            max_min_runtime_s: self.runtime.config().max_min_runtime,
            clusters: clusters.into_iter().map(|c| c.name).collect(),
        })
    }

    async fn submit_workload(
        &self,
        actor: &CurrentUser,
        form: SubmitForm,
    ) -> Result<WorkloadView, AppError> {
        let input = SubmitWorkload::from_form(form)?;
        Ok(workloads::submit(&self.pool, &self.runtime, actor, input).await?)
    }

    async fn list_workloads(
        &self,
        actor: &CurrentUser,
        mine: bool,
        state: Option<String>,
    ) -> Result<Vec<WorkloadView>, AppError> {
        let state = crate::workloads::domain::state_filter(state.as_deref())?;
        Ok(workload_repo::list_workloads(
            &self.pool,
            mine.then_some(actor.id),
            state,
            None,
            500,
            self.runtime.now(),
        )
        .await
        .map_err(ServerError::from)?)
    }

    async fn workload_detail(
        &self,
        actor: &CurrentUser,
        id: i64,
    ) -> Result<WorkloadDetail, AppError> {
        Ok(workloads::detail(&self.pool, &self.runtime, actor, id).await?)
    }

    async fn cancel_workload(
        &self,
        actor: &CurrentUser,
        id: i64,
    ) -> Result<WorkloadView, AppError> {
        Ok(workloads::cancel(&self.pool, &self.runtime, actor, id).await?)
    }

    async fn queue(
        &self,
        _actor: &CurrentUser,
        limit: usize,
        cluster: String,
    ) -> Result<QueueView, AppError> {
        let (rows, total) =
            workloads::queue(&self.pool, &self.runtime, limit, Some(cluster.as_str())).await?;
        Ok(QueueView { rows, total })
    }

    async fn nodes(&self, _actor: &CurrentUser) -> Result<Vec<NodeView>, AppError> {
        Ok(node_service::views(&self.pool, self.runtime.now()).await?)
    }

    async fn node_action(
        &self,
        actor: &CurrentUser,
        name: String,
        action: String,
    ) -> Result<(), AppError> {
        node_service::act(&self.pool, &self.runtime, actor, &name, &action).await?;
        Ok(())
    }

    async fn remove_node(&self, actor: &CurrentUser, name: String) -> Result<(), AppError> {
        Ok(node_service::remove_by(&self.pool, actor, &name).await?)
    }

    async fn register_node(
        &self,
        actor: &CurrentUser,
        name: String,
        cluster: String,
    ) -> Result<RegisteredNode, AppError> {
        let (node, token) = node_service::register_by(
            &self.pool,
            actor,
            &name,
            Some(cluster.as_str()),
            self.runtime.now(),
        )
        .await?;
        Ok(RegisteredNode {
            name: node.name,
            token,
            cluster: node.cluster,
        })
    }

    async fn clusters(
        &self,
        _actor: &CurrentUser,
    ) -> Result<Vec<app::nodes::ClusterSummary>, AppError> {
        let mut db = self.pool.acquire().await.map_err(ServerError::from)?;
        Ok(crate::clusters::in_use(&mut db).await?)
    }

    async fn list_tokens(&self, actor: &CurrentUser) -> Result<Vec<TokenView>, AppError> {
        Ok(tokens::list_tokens(&self.pool, actor.id).await?)
    }

    async fn create_token(&self, actor: &CurrentUser, name: String) -> Result<String, AppError> {
        Ok(tokens::create_token(&self.pool, actor.id, &name, self.runtime.now()).await?)
    }

    async fn revoke_token(&self, actor: &CurrentUser, id: i64) -> Result<(), AppError> {
        Ok(tokens::revoke_token(&self.pool, actor.id, id, self.runtime.now()).await?)
    }

    async fn settings(&self, actor: &CurrentUser) -> Result<SettingsView, AppError> {
        Ok(settings::view(&self.pool, &self.runtime, actor).await?)
    }

    async fn update_settings(
        &self,
        actor: &CurrentUser,
        form: SettingsForm,
    ) -> Result<SettingsView, AppError> {
        Ok(settings::update(&self.pool, &self.runtime, actor, form).await?)
    }

    async fn tree(
        &self,
        actor: &CurrentUser,
        cluster: String,
    ) -> Result<Vec<TreeNodeView>, AppError> {
        let cluster = Some(cluster.as_str());
        Ok(budget::view::tree_view_of(&self.pool, &self.runtime, actor, cluster).await?)
    }

    async fn propose_change(
        &self,
        actor: &CurrentUser,
        input: ProposalInput,
    ) -> Result<ChangeRequestView, AppError> {
        let effective_at = crate::reports::calendar::parse_date(&input.effective_date)?;
        let proposal = Proposal::from_form(input, effective_at);
        Ok(changes::propose(&self.pool, actor, proposal, self.runtime.now()).await?)
    }

    async fn change_requests(
        &self,
        actor: &CurrentUser,
        scope: String,
        node: Option<String>,
    ) -> Result<Vec<ChangeRequestView>, AppError> {
        let node = node.filter(|n| !n.is_empty());
        let all = changes::list(&self.pool, actor, None, node.as_deref()).await?;
        Ok(if scope == "awaiting" {
            all.into_iter().filter(|r| r.can_decide).collect()
        } else {
            all
        })
    }

    async fn withdraw_change(
        &self,
        actor: &CurrentUser,
        id: i64,
    ) -> Result<ChangeRequestView, AppError> {
        Ok(changes::withdraw(&self.pool, actor, id, self.runtime.now()).await?)
    }

    async fn rebase_change(
        &self,
        actor: &CurrentUser,
        id: i64,
    ) -> Result<ChangeRequestView, AppError> {
        Ok(changes::rebase(&self.pool, actor, id, self.runtime.now()).await?)
    }

    async fn decide_change(
        &self,
        actor: &CurrentUser,
        id: i64,
        approve: bool,
        comment: String,
    ) -> Result<ChangeRequestView, AppError> {
        let decided =
            changes::decide(&self.pool, actor, id, approve, &comment, self.runtime.now()).await?;
        self.runtime.wake();
        Ok(decided)
    }

    async fn change_impact(&self, actor: &CurrentUser, id: i64) -> Result<ImpactView, AppError> {
        Ok(budget::impact::impact(&self.pool, actor, id, self.runtime.now()).await?)
    }

    async fn nav_counts(&self, actor: &CurrentUser) -> Result<app::inbox::NavCounts, AppError> {
        Ok(crate::inbox::nav_counts(&self.pool, actor, self.runtime.now()).await?)
    }

    async fn share_history(
        &self,
        _actor: &CurrentUser,
        path: String,
    ) -> Result<app::budget::shares::ShareHistory, AppError> {
        Ok(crate::budget::shares::history(&self.pool, &path).await?)
    }

    async fn webhook(
        &self,
        actor: &CurrentUser,
    ) -> Result<app::settings::webhook::WebhookView, AppError> {
        Ok(crate::webhook::view(&self.pool, actor).await?)
    }

    async fn set_webhook(
        &self,
        actor: &CurrentUser,
        url: String,
        reason: Option<String>,
    ) -> Result<app::settings::webhook::WebhookView, AppError> {
        let now = self.runtime.now();
        Ok(crate::webhook::set(&self.pool, actor, &url, reason.as_deref(), now).await?)
    }

    async fn test_webhook(
        &self,
        actor: &CurrentUser,
    ) -> Result<app::settings::webhook::WebhookView, AppError> {
        Ok(crate::webhook::test(&self.pool, actor, self.runtime.now()).await?)
    }

    async fn inbox(&self, actor: &CurrentUser) -> Result<app::inbox::Inbox, AppError> {
        Ok(crate::inbox::inbox(&self.pool, actor, self.runtime.now()).await?)
    }

    async fn mark_inbox_read(&self, actor: &CurrentUser) -> Result<(), AppError> {
        Ok(crate::inbox::mark_read(&self.pool, actor, self.runtime.now()).await?)
    }

    async fn demo_mode(&self) -> Result<bool, AppError> {
        let marked = crate::settings::repo::value(&self.pool, crate::demo::MARKER)
            .await
            .map_err(ServerError::from)?;
        Ok(marked.is_some())
    }

    async fn node_people(
        &self,
        actor: &CurrentUser,
        path: String,
    ) -> Result<app::budget::people::NodePeople, AppError> {
        Ok(budget::people::people(&self.pool, actor, &path).await?)
    }

    async fn change_grant(
        &self,
        actor: &CurrentUser,
        kind: app::budget::people::GrantKind,
        path: String,
        username: String,
        add: bool,
    ) -> Result<app::budget::people::NodePeople, AppError> {
        Ok(budget::people::change(
            &self.pool,
            actor,
            kind,
            &path,
            &username,
            add,
            self.runtime.now(),
        )
        .await?)
    }

    async fn quarterly_review(
        &self,
        _actor: &CurrentUser,
        year: Option<i32>,
        quarter: Option<u32>,
        each_cluster: bool,
    ) -> Result<app::reports::Review, AppError> {
        let now = self.runtime.now();
        let fiscal = self.runtime.config().fiscal();
        let scope = crate::reports::review::Scope::of(None, each_cluster);
        Ok(
            crate::reports::review::quarter(&self.pool, fiscal, year.zip(quarter), now, scope)
                .await?,
        )
    }

    async fn trend(
        &self,
        _actor: &CurrentUser,
        year: Option<i32>,
        quarter: Option<u32>,
    ) -> Result<app::reports::Trend, AppError> {
        Ok(crate::reports::trend::trend(
            &self.pool,
            self.runtime.config().fiscal(),
            year.zip(quarter),
            crate::reports::trend::QUARTERS,
            self.runtime.now(),
        )
        .await?)
    }

    async fn people_usage(
        &self,
        _actor: &CurrentUser,
        path: String,
        from: i64,
        to: i64,
    ) -> Result<Vec<app::reports::PersonUsage>, AppError> {
        Ok(
            crate::reports::people::by_person(&self.pool, &path, from, to, self.runtime.now())
                .await?,
        )
    }

    async fn period_review(
        &self,
        _actor: &CurrentUser,
        from: String,
        to: String,
        each_cluster: bool,
    ) -> Result<app::reports::Review, AppError> {
        let day = |field: &'static str, raw: &str| -> Result<i64, ServerError> {
            app::calendar::parse_day(raw)
                .map_err(|e| ServerError::invalid(field, e.0))?
                .ok_or_else(|| ServerError::invalid(field, "Choose a day."))
        };
        let from = day("from", &from)?;
        // The last day is included.
        let to = day("to", &to)? + app::calendar::DAY;
        let now = self.runtime.now();
        let fiscal = self.runtime.config().fiscal();
        let scope = crate::reports::review::Scope::of(None, each_cluster);
        Ok(crate::reports::review::period(&self.pool, fiscal, from, to, now, scope).await?)
    }

    async fn usage_series(
        &self,
        _actor: &CurrentUser,
        node: String,
        cluster: String,
        from: i64,
        to: i64,
        granularity: String,
    ) -> Result<app::reports::UsageSeries, AppError> {
        use crate::reports::usage;
        let parsed = usage::parse_granularity(&granularity)?;
        let cluster = crate::workloads::service::cluster_filter(&self.pool, Some(&cluster)).await?;
        let now = self.runtime.now();
        Ok(usage::usage_series(&self.pool, node, cluster.as_ref(), from, to, parsed, now).await?)
    }
}
