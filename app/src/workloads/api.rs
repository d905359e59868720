//! Server functions of the workload, queue, node and token pages. Authorization lives in the
//! backend's services, shared with the JSON API.

use super::{NodeView, QueueView, TokenView, WorkloadDetail, WorkloadView};
use crate::error::AppError;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "workloads/projects")]
pub async fn my_projects() -> Result<Vec<String>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.my_projects(&require_user()?).await }.await)
}

#[server(prefix = "/api", endpoint = "workloads/submit")]
pub async fn submit_workload(
    project: String,
    name: String,
    command: String,
    gpus: String,
    min_runtime_s: String,
    #[server(default)] resumable: Option<String>,
    priority: String,
) -> Result<WorkloadView, AppError> {
    use crate::{backend::*, workloads::SubmitForm};
    let form = SubmitForm {
        project,
        name,
        command,
        gpus,
        min_runtime_s,
        resumable: resumable.is_some_and(|v| v == "on" || v == "true"),
        priority,
    };
    with_status(async { backend()?.submit_workload(&require_user()?, form).await }.await)
}

#[server(prefix = "/api", endpoint = "workloads/list")]
pub async fn list_workloads(
    mine: bool,
    state: Option<String>,
) -> Result<Vec<WorkloadView>, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .list_workloads(&require_user()?, mine, state)
                .await
        }
        .await,
    )
}

#[server(prefix = "/api", endpoint = "workloads/detail")]
pub async fn get_workload_detail(id: i64) -> Result<WorkloadDetail, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.workload_detail(&require_user()?, id).await }.await)
}

#[server(prefix = "/api", endpoint = "workloads/cancel")]
pub async fn cancel_workload(id: i64) -> Result<WorkloadView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.cancel_workload(&require_user()?, id).await }.await)
}

/// The queue in scheduler order: its first [`QUEUE_PAGE`] rows, or every row when `all`.
#[server(prefix = "/api", endpoint = "queue")]
pub async fn queue(#[server(default)] all: bool) -> Result<QueueView, AppError> {
    use crate::backend::*;
    let limit = if all { usize::MAX } else { QUEUE_PAGE };
    with_status(async { backend()?.queue(&require_user()?, limit).await }.await)
}

/// Rows the Queue page shows before "Show all".
pub const QUEUE_PAGE: usize = 200;

#[server(prefix = "/api", endpoint = "nodes/list")]
pub async fn list_nodes() -> Result<Vec<NodeView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.nodes(&require_user()?).await }.await)
}

#[server(prefix = "/api", endpoint = "nodes/action")]
pub async fn node_action(name: String, action: String) -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.node_action(&require_user()?, name, action).await }.await)
}

/// Registers a node; returns its agent token (shown once).
#[server(prefix = "/api", endpoint = "nodes/register")]
pub async fn register_node(name: String) -> Result<String, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.register_node(&require_user()?, name).await }.await)
}

#[server(prefix = "/api", endpoint = "tokens/list")]
pub async fn list_tokens() -> Result<Vec<TokenView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.list_tokens(&require_user()?).await }.await)
}

/// Creates a personal API token; returns the secret (shown once).
#[server(prefix = "/api", endpoint = "tokens/create")]
pub async fn create_token(name: String) -> Result<String, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.create_token(&require_user()?, name).await }.await)
}

#[server(prefix = "/api", endpoint = "tokens/revoke")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.revoke_token(&require_user()?, id).await }.await)
}
