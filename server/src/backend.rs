//! The server's implementation of the UI's [`Backend`]: the services, with the actor's rights checked.

use crate::{
    api::tokens,
    budget::{self, changes, changes::Proposal},
    nodes::{repo as node_repo, service as node_service},
    runtime::{snapshot::parse_indices, Runtime},
    settings,
    users::service,
    workloads::{domain::SubmitWorkload, repo as workload_repo, service as workloads},
    ServerError,
};
use app::{
    backend::Backend,
    budget::{ChangeRequestView, ImpactView, ProposalInput, TreeNodeView},
    error::AppError,
    model::{CurrentUser, NewUser, UserSummary},
    settings::{SettingsForm, SettingsView},
    workloads::{
        GpuHolder, GpuSlot, NodeView, QueueView, SubmitForm, TokenView, WorkloadDetail,
        WorkloadView,
    },
};
use sqlx::AnyPool;
use std::collections::BTreeMap;

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

fn require_admin(actor: &CurrentUser, what: &str) -> Result<(), ServerError> {
    if actor.is_admin() {
        Ok(())
    } else {
        Err(ServerError::Forbidden(format!(
            "Only administrators can {what}."
        )))
    }
}

/// A form field that must be a whole number.
fn whole(field: &'static str, raw: &str, what: &str) -> Result<i64, ServerError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(0);
    }
    raw.parse().map_err(|_| {
        ServerError::invalid(
            field,
            format!("Enter {what} as a whole number, not \"{raw}\"."),
        )
    })
}

#[async_trait::async_trait]
impl Backend for ServerBackend {
    async fn cluster_activity(
        &self,
        _actor: &CurrentUser,
        from: i64,
        to: i64,
        granularity: String,
    ) -> Result<app::reports::ClusterActivity, AppError> {
        use crate::reports::{activity, usage};
        let parsed = usage::Granularity::parse(&granularity)?;
        Ok(activity::activity(&self.pool, from, to, parsed, crate::users::service::now()).await?)
    }

    async fn lab_sources(&self, actor: &CurrentUser) -> Result<app::lab::LabSources, AppError> {
        Ok(self.lab.sources(actor)?)
    }

    async fn start_lab_run(
        &self,
        actor: &CurrentUser,
        form: app::lab::LabForm,
    ) -> Result<u64, AppError> {
        Ok(self.lab.start(actor, form).await?)
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
        let user =
            service::create_user(&self.pool, &input.username, &input.role, input.password).await?;
        tracing::info!(actor = %actor.username, user = %user.username, role = %user.role, "user created");
        Ok(user)
    }

    async fn set_user_disabled(
        &self,
        actor: &CurrentUser,
        user_id: i64,
        disabled: bool,
    ) -> Result<UserSummary, AppError> {
        let user = service::set_disabled(&self.pool, actor, user_id, disabled).await?;
        tracing::info!(actor = %actor.username, user = %user.username, disabled, "user access changed");
        Ok(user)
    }

    async fn my_projects(&self, actor: &CurrentUser) -> Result<Vec<String>, AppError> {
        Ok(workloads::my_projects(&self.pool, actor).await?)
    }

    async fn submit_workload(
        &self,
        actor: &CurrentUser,
        form: SubmitForm,
    ) -> Result<WorkloadView, AppError> {
        let gpus = whole("gpus", &form.gpus, "the GPU count")?;
        let input = SubmitWorkload {
            project: form.project,
            name: form.name,
            command: form.command,
            gpus: if form.gpus.trim().is_empty() { 0 } else { gpus },
            min_runtime_s: whole(
                "min_runtime_s",
                &form.min_runtime_s,
                "the minimum runtime in seconds",
            )?,
            resumable: form.resumable,
            priority: whole("priority", &form.priority, "the priority")?,
        };
        Ok(workloads::submit(&self.pool, &self.runtime, actor, input).await?)
    }

    async fn list_workloads(
        &self,
        actor: &CurrentUser,
        mine: bool,
        state: Option<String>,
    ) -> Result<Vec<WorkloadView>, AppError> {
        let state = state.filter(|s| !s.is_empty() && s != "all");
        Ok(workload_repo::list_workloads(
            &self.pool,
            mine.then_some(actor.id),
            state.as_deref(),
            500,
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

    async fn queue(&self, _actor: &CurrentUser, limit: usize) -> Result<QueueView, AppError> {
        let rows = workloads::queue(&self.pool, &self.runtime).await?;
        Ok(QueueView {
            total: rows.len(),
            rows: rows.iter().take(limit).cloned().collect(),
        })
    }

    async fn nodes(&self, _actor: &CurrentUser) -> Result<Vec<NodeView>, AppError> {
        Ok(node_views(&self.pool).await?)
    }

    async fn node_action(
        &self,
        actor: &CurrentUser,
        name: String,
        action: String,
    ) -> Result<(), AppError> {
        require_admin(actor, "change a node's state")?;
        node_service::set_admin_state(&self.pool, &name, &action).await?;
        tracing::info!(admin = %actor.username, node = %name, %action, "node state changed");
        self.runtime.wake();
        Ok(())
    }

    async fn register_node(&self, actor: &CurrentUser, name: String) -> Result<String, AppError> {
        require_admin(actor, "register nodes")?;
        let (node, token) = node_service::register_node(&self.pool, &name).await?;
        tracing::info!(admin = %actor.username, node = %node.name, "node registered");
        Ok(token)
    }

    async fn list_tokens(&self, actor: &CurrentUser) -> Result<Vec<TokenView>, AppError> {
        Ok(tokens::list_tokens(&self.pool, actor.id).await?)
    }

    async fn create_token(&self, actor: &CurrentUser, name: String) -> Result<String, AppError> {
        Ok(tokens::create_token(&self.pool, actor.id, &name).await?)
    }

    async fn revoke_token(&self, actor: &CurrentUser, id: i64) -> Result<(), AppError> {
        Ok(tokens::revoke_token(&self.pool, actor.id, id).await?)
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

    async fn tree(&self, actor: &CurrentUser) -> Result<Vec<TreeNodeView>, AppError> {
        Ok(budget::view::tree_view(&self.pool, &self.runtime, actor).await?)
    }

    async fn propose_change(
        &self,
        actor: &CurrentUser,
        input: ProposalInput,
    ) -> Result<ChangeRequestView, AppError> {
        let effective_at = parse_date(&input.effective_date)?;
        let proposal = Proposal {
            node: input.node,
            shares: input
                .children
                .iter()
                .map(|c| (c.path.clone(), c.share))
                .collect(),
            renames: input
                .children
                .iter()
                .filter_map(|c| {
                    c.new_name
                        .clone()
                        .filter(|n| !n.trim().is_empty())
                        .map(|n| (c.path.clone(), n))
                })
                .collect(),
            justification: input.justification,
            effective_at,
        };
        Ok(changes::propose(&self.pool, actor, proposal).await?)
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

    async fn decide_change(
        &self,
        actor: &CurrentUser,
        id: i64,
        approve: bool,
        comment: String,
    ) -> Result<ChangeRequestView, AppError> {
        let decided = changes::decide(&self.pool, actor, id, approve, &comment).await?;
        self.runtime.wake();
        Ok(decided)
    }

    async fn change_impact(&self, actor: &CurrentUser, id: i64) -> Result<ImpactView, AppError> {
        Ok(budget::impact::impact(&self.pool, actor, id).await?)
    }

    async fn quarterly_review(
        &self,
        _actor: &CurrentUser,
        year: i32,
        quarter: u32,
    ) -> Result<app::reports::Review, AppError> {
        let (from, to) = crate::reports::calendar::quarter(year, quarter)
            .ok_or_else(|| ServerError::invalid("quarter", "A quarter is 1, 2, 3 or 4."))?;
        Ok(
            crate::reports::review::review(&self.pool, from, to, format!("Q{quarter} {year}"))
                .await?,
        )
    }

    async fn usage_series(
        &self,
        _actor: &CurrentUser,
        node: String,
        from: i64,
        to: i64,
        granularity: String,
    ) -> Result<app::reports::UsageSeries, AppError> {
        use crate::reports::usage;
        let parsed = usage::Granularity::parse(&granularity)?;
        let cells = usage::series(&self.pool, &node, from, to, parsed).await?;
        let buckets: Vec<i64> = cells
            .keys()
            .map(|(bucket, _)| *bucket)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let index: std::collections::HashMap<i64, usize> =
            buckets.iter().enumerate().map(|(i, b)| (*b, i)).collect();
        // The node itself has the shortest path (a prefix of its children's); it goes first.
        let mut lines: Vec<app::reports::UsageLine> = Vec::new();
        for ((bucket, path), [funded, owed, delivered, free]) in &cells {
            let at = match lines.iter().position(|l| &l.path == path) {
                Some(at) => at,
                None => {
                    let empty = vec![0.0; buckets.len()];
                    lines.push(app::reports::UsageLine {
                        path: path.clone(),
                        funded: empty.clone(),
                        owed: empty.clone(),
                        delivered: empty.clone(),
                        unallocated: empty,
                    });
                    lines.len() - 1
                }
            };
            let (line, i) = (&mut lines[at], index[bucket]);
            line.funded[i] = *funded;
            line.owed[i] = *owed;
            line.delivered[i] = *delivered;
            line.unallocated[i] = *free;
        }
        lines.sort_by(|a, b| (a.path.len(), &a.path).cmp(&(b.path.len(), &b.path)));
        if lines.len() > 1 {
            lines[1..].sort_by(|a, b| a.path.cmp(&b.path));
        }
        Ok(app::reports::UsageSeries {
            node,
            from,
            to,
            granularity: parsed.name().into(),
            buckets,
            lines,
        })
    }
}

/// `YYYY-MM-DD` → that day's 00:00 UTC; empty → `None` (on approval).
fn parse_date(raw: &str) -> Result<Option<i64>, ServerError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let invalid = || {
        ServerError::invalid(
            "effective_at",
            format!("\"{raw}\" is not a date like 2027-01-01."),
        )
    };
    let parts: Vec<i64> = raw
        .split('-')
        .map(|p| p.parse().map_err(|_| invalid()))
        .collect::<Result<_, _>>()?;
    let [y, m, d] = parts[..] else {
        return Err(invalid());
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(invalid());
    }
    Ok(Some(crate::reports::calendar::epoch_of(y, m, d)))
}

/// An open run's GPUs and what the Nodes page says about their holder.
#[derive(sqlx::FromRow)]
struct HeldGpus {
    node_id: i64,
    gpu_indices: String,
    workload_id: i64,
    name: String,
    project: String,
    protected_until: Option<i64>,
    #[sqlx(try_from = "crate::db::Flag")]
    allocated: bool,
}

/// Every node with its health, heartbeat age and what holds each GPU.
pub async fn node_views(pool: &AnyPool) -> Result<Vec<NodeView>, ServerError> {
    let now = service::now();
    let rows = node_repo::list_nodes(pool).await?;
    let runs: Vec<HeldGpus> = sqlx::query_as(
        "select r.node_id, r.gpu_indices, w.workload_id, w.name, b.path as project, r.protected_until, r.allocated
         from workload_run r join workload w on w.workload_id = r.workload_id
         join budget_node b on b.budget_node_id = w.budget_node_id
         where r.ended_at is null order by r.node_id",
    )
    .fetch_all(pool)
    .await?;
    let mut holders: BTreeMap<(i64, u32), GpuHolder> = BTreeMap::new();
    for HeldGpus {
        node_id,
        gpu_indices: indices,
        workload_id,
        name,
        project,
        protected_until,
        allocated,
    } in runs
    {
        for index in parse_indices(&indices) {
            holders.insert(
                (node_id, index),
                GpuHolder {
                    workload_id,
                    name: name.clone(),
                    project: project.clone(),
                    protected_until,
                    allocated,
                },
            );
        }
    }
    Ok(rows
        .into_iter()
        .map(|n| NodeView {
            slots: (0..n.gpu_count.max(0) as u32)
                .map(|index| GpuSlot {
                    index,
                    holder: holders.get(&(n.node_id, index)).cloned(),
                })
                .collect(),
            state: n.health().to_string(),
            heartbeat_age_s: n.last_heartbeat_at.map(|t| now - t),
            health_reason: n.health_reason,
            unhealthy_since: n.unhealthy_since,
            name: n.name,
            gpu_model: n.gpu_model,
            gpus: n.gpu_count,
        })
        .collect())
}
