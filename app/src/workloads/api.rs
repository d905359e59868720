//! Server functions of the workload and queue pages. Authorization lives in the
//! backend's services, shared with the JSON API.

// `submit_workload` takes one argument per field of the Submit form, as the browser posts it; the
// server macro's generated client and server halves carry no attribute of the function.
#![allow(clippy::too_many_arguments)]

use super::{QueueView, SubmitOptions, WorkloadDetail, WorkloadView};
use crate::error::AppError;
use leptos::prelude::*;

#[server(name = GetSubmitChoices, prefix = "/api", endpoint = "workloads/choices")]
pub async fn submit_choices() -> Result<SubmitOptions, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.submit_choices(&require_user()?).await }.await)
}

#[server(prefix = "/api", endpoint = "workloads/submit")]
pub async fn submit_workload(
    project: String,
    name: String,
    command: String,
    gpus: String,
    min_runtime: String,
    #[server(default)] resumable: Option<String>,
    priority: String,
    #[server(default)] cluster: String,
) -> Result<WorkloadView, AppError> {
    use crate::{backend::*, workloads::SubmitForm};
    let form = SubmitForm {
        project,
        name,
        command,
        gpus,
        min_runtime,
        resumable: resumable.is_some_and(|v| v == "on" || v == "true"),
        priority,
        cluster,
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
pub async fn queue(
    #[server(default)] all: bool,
    #[server(default)] cluster: String,
) -> Result<QueueView, AppError> {
    use crate::backend::*;
    let limit = if all { usize::MAX } else { QUEUE_PAGE };
    with_status(async { backend()?.queue(&require_user()?, limit, cluster).await }.await)
}

/// Rows the Queue page shows before "Show all".
pub const QUEUE_PAGE: usize = 200;
