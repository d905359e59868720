//! Applying one decision to the database. The decision was made on a snapshot read without the
//! write lock, so each action is applied only if its workload still stands as it was read (a
//! workload cancelled, finished or ended meanwhile is left alone, and the pass runs again): GPUs
//! the snapshot saw free are still free, since only this leader's decisions start work.

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
    /// Actions left out because their workload changed after the snapshot was read.
    pub stale: usize,
    /// The cluster and the rule behind each run stopped (`drain` for a draining node), for
    /// `/metrics`.
    pub rules: Vec<(String, &'static str)>,
}

impl Applied {
    /// Adds what another cluster's decision did.
    pub fn add(&mut self, other: Applied) {
        self.started += other.started;
        self.stopped += other.stopped;
        self.nodes.extend(other.nodes);
        self.stale += other.stale;
        self.rules.extend(other.rules);
    }
}

/// Whether the workload is still as the snapshot read it: in `state`, with as many runs.
async fn still(
    db: &mut AnyConnection,
    snapshot: &Snapshot,
    workload: WorkloadId,
    state: WorkloadState,
) -> Result<bool, ServerError> {
    let id = workload.0 as i64;
    let Some(read) = snapshot.workload(workload) else {
        return Ok(false);
    };
    let now = repo::workload_standing(&mut *db, id).await?;
    Ok(now.is_some_and(|(s, runs)| s == state.as_str() && runs == read.run_count))
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
                if !still(db, snapshot, *workload, WorkloadState::Queued).await? {
                    applied.stale += 1;
                    continue;
                }
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
                if !still(db, snapshot, *workload, WorkloadState::Running).await? {
                    applied.stale += 1;
                    continue;
                }
                let detail = reasons::preempt(snapshot, reason, *then);
                let nodes = stop(db, *workload, *then, "preempted", &detail, now).await?;
                applied.stopped += 1;
                applied
                    .rules
                    .push((snapshot.cluster.name.clone(), reason.rule.name()));
                applied.nodes.extend(nodes);
            }
            Action::Drain {
                workload,
                reason,
                then,
            } => {
                if !still(db, snapshot, *workload, WorkloadState::Running).await? {
                    applied.stale += 1;
                    continue;
                }
                let detail = reasons::drain(snapshot, reason, *then);
                let nodes = stop(db, *workload, *then, "drained", &detail, now).await?;
                applied.stopped += 1;
                applied.rules.push((snapshot.cluster.name.clone(), "drain"));
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
