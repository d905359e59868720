//! Server functions of the simulator lab.

use super::{Gantt, LabForm, LabRunView, LabSources};
use crate::error::AppError;
use leptos::prelude::*;

/// What the lab can simulate besides uploads.
#[server(name = GetLabSources, prefix = "/api", endpoint = "lab/sources")]
pub async fn lab_sources() -> Result<LabSources, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.lab_sources(&require_user()?).await }.await)
}

/// Validates the input and queues a run of both policies on it; returns the run's id.
#[server(prefix = "/api", endpoint = "lab/start")]
pub async fn start_lab_run(form: LabForm) -> Result<u64, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.start_lab_run(&require_user()?, form).await }.await)
}

/// One run: its progress, and its result once done.
#[server(prefix = "/api", endpoint = "lab/run")]
pub async fn get_lab_run(id: u64) -> Result<LabRunView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.lab_run(&require_user()?, id).await }.await)
}

/// The recent runs, newest first (without their results).
#[server(prefix = "/api", endpoint = "lab/runs")]
pub async fn lab_runs() -> Result<Vec<LabRunView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.lab_runs(&require_user()?).await }.await)
}

/// The Gantt data of run `id` under `policy` for its first `gpus` GPUs over `[from, to)`.
#[server(name = GetLabGantt, prefix = "/api", endpoint = "lab/gantt")]
pub async fn lab_gantt(
    id: u64,
    policy: String,
    gpus: u32,
    from: i64,
    to: i64,
) -> Result<Gantt, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .lab_gantt(&require_user()?, id, policy, gpus, from, to)
                .await
        }
        .await,
    )
}
