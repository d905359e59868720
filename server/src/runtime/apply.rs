//! Applying one decision to the database, inside the decision's transaction.

use super::{
    ledger, reasons, repo,
    snapshot::{format_indices, Snapshot},
};
use crate::{
    workloads::repo::{insert_event, leave_run},
    ServerError,
};
use app::workloads::{reasons::Event, GpuPlacement, WorkloadState};
use scheduler::{Action, AfterStop, Decision, Placement, WorkloadId};
use sqlx::AnyConnection;
use std::collections::BTreeSet;

/// What a pass changed, so the runtime knows whether to tell agents, and whose.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    pub started: usize,
    pub stopped: usize,
    /// The nodes where runs started or ended.
    pub nodes: BTreeSet<i64>,
}

pub async fn apply(
    db: &mut AnyConnection,
    snapshot: &Snapshot,
    decision: &Decision,
    now: i64,
) -> Result<Applied, ServerError> {
    let mut applied = Applied::default();
    for action in &decision.actions {
        match action {
            Action::Start {
                workload,
                placement,
                protection,
            } => {
                start(
                    db,
                    snapshot,
                    *workload,
                    placement,
                    reasons::protection(*protection),
                    now,
                )
                .await?;
                applied.started += 1;
                applied.nodes.extend(
                    placement
                        .parts
                        .iter()
                        .map(|part| snapshot.node_row(part.node).node_id),
                );
            }
            Action::Preempt {
                workload,
                reason,
                then,
            } => {
                let detail = reasons::preempt(snapshot, reason, *then);
                let nodes = stop(db, *workload, *then, "preempted", &detail, now).await?;
                applied.stopped += 1;
                applied.nodes.extend(nodes);
            }
            Action::Drain {
                workload,
                reason,
                then,
            } => {
                let detail = reasons::drain(snapshot, reason, *then);
                let nodes = stop(db, *workload, *then, "drained", &detail, now).await?;
                applied.stopped += 1;
                applied.nodes.extend(nodes);
            }
        }
    }
    Ok(applied)
}

async fn start(
    db: &mut AnyConnection,
    snapshot: &Snapshot,
    workload: WorkloadId,
    placement: &Placement,
    protected_until: Option<i64>,
    now: i64,
) -> Result<(), ServerError> {
    let id = workload.0 as i64;
    let row = snapshot
        .workload(workload)
        .ok_or_else(|| ServerError::NotFound(format!("workload {id}")))?;
    let allocated = row.min_runtime_s > 0;
    let mut parts = Vec::new();
    for part in &placement.parts {
        let node = snapshot.node_row(part.node);
        repo::insert_run(
            &mut *db,
            id,
            node.node_id,
            &format_indices(part.gpus),
            part.gpus.count() as i64,
            allocated,
            now,
            protected_until,
        )
        .await?;
        parts.push(GpuPlacement {
            node: node.name.clone(),
            gpus: part.gpus.indices().collect(),
        });
    }
    repo::mark_running(&mut *db, id, now, protected_until).await?;
    let event = Event::Started {
        placement: parts,
        protected_until,
        resumed: row.run_count > 0,
        wait_s: now - row.submitted_at,
    };
    insert_event(&mut *db, id, now, None, &event).await?;
    Ok(())
}

/// Ends the workload's current run (charging it through `now`) and moves the workload on.
/// Returns the nodes its run was on.
pub async fn stop(
    db: &mut AnyConnection,
    workload: WorkloadId,
    then: AfterStop,
    end_kind: &str,
    event: &Event,
    now: i64,
) -> Result<Vec<i64>, ServerError> {
    let id = workload.0 as i64;
    let nodes = close_runs(db, id, end_kind, now).await?;
    let state = match then {
        AfterStop::Requeue => WorkloadState::Queued,
        AfterStop::EndPreempted => WorkloadState::Preempted,
        AfterStop::Fail => WorkloadState::Failed,
    };
    leave_run(&mut *db, id, state, None, now).await?;
    insert_event(&mut *db, id, now, None, event).await?;
    Ok(nodes)
}

/// Charges and closes every open run of a workload (a multi-node one has one per node); returns
/// the nodes they were on, whose agents must stop them.
pub async fn close_runs(
    db: &mut AnyConnection,
    workload_id: i64,
    end_kind: &str,
    now: i64,
) -> Result<Vec<i64>, ServerError> {
    let runs = repo::open_runs_of(&mut *db, workload_id).await?;
    let nodes = runs.iter().map(|&(_, node)| node).collect();
    for (run, _) in runs {
        ledger::charge_run(db, run, now).await?;
        repo::end_run(&mut *db, run, now, end_kind).await?;
    }
    Ok(nodes)
}
