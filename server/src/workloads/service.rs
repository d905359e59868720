//! Workload operations shared by the JSON API and the pages.

use super::{
    domain::{NewWorkload, SubmitWorkload},
    repo,
};
use crate::runtime::{
    queue_cache::{Freshness, Served},
    PageSource,
};
use crate::{
    budget::repo as budget_repo,
    db::Flag,
    metrics::PageSnapshot,
    runtime::{apply, queue_cache::QueueEntry, reasons, snapshot, Runtime},
    ServerError,
};
use app::model::CurrentUser;
use app::nodes::NodeHealth;
use app::workloads::reasons::{AfterStop, Drain, DrainRule, Event};
use app::workloads::{
    AheadSibling, GpuPlacement, Leaving, PathRatio, QueueExplanation, QueueRow, WorkloadDetail,
    WorkloadState, WorkloadView,
};
use scheduler::WorkloadId;
use sqlx::{AnyConnection, AnyPool};

pub async fn submit(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    input: SubmitWorkload,
) -> Result<WorkloadView, ServerError> {
    let new = NewWorkload::parse(input, runtime.config().max_min_runtime)?;
    // Its checks read on one connection, and its view is read inside its write: under a crowd of
    // page readers every borrow of a connection waits its turn behind theirs, and a submission
    // that borrowed one per statement (six) waited seconds at 50,000 queued with 200 readers.
    let mut db = pool.acquire().await?;
    let leaf = repo::project_node(&mut *db, &new.project).await?;
    let leaf_id = match leaf {
        None => {
            return Err(ServerError::invalid(
                "project",
                format!("There is no project \"{}\".", new.project),
            ))
        }
        Some((_, Flag(false))) => {
            return Err(ServerError::invalid(
                "project",
                format!(
                    "\"{}\" is not a leaf of the budget tree; choose one of its projects.",
                    new.project
                ),
            ))
        }
        Some((id, Flag(true))) => id,
    };
    let member = budget_repo::member_leaves(&mut *db, actor.id)
        .await?
        .iter()
        .any(|(id, _)| *id == leaf_id);
    if !member {
        return Err(ServerError::invalid(
            "project",
            format!(
                "You are not a member of \"{}\"; ask its owner to add you.",
                new.project
            ),
        ));
    }
    let cluster = crate::clusters::for_submit(&mut db, new.cluster.as_deref()).await?;
    check_fits(&mut db, &cluster, new.gpus).await?;
    drop(db);
    let now = runtime.now();
    let write = runtime.writing_workloads();
    let mut tx = crate::db::begin_write(pool).await?;
    let id = repo::insert_workload(
        &mut *tx,
        actor.id,
        leaf_id,
        &new.name,
        &new.command,
        new.gpus,
        new.min_runtime_s,
        new.resumable,
        new.priority,
        cluster.cluster_id,
        now,
    )
    .await?;
    let event = Event::Submitted {
        by: actor.username.clone(),
    };
    repo::insert_event(&mut *tx, id, now, None, &event).await?;
    let view = repo::find_workload(&mut *tx, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("workload {id}")))?;
    tx.commit().await?;
    write.committed([id]);
    runtime.wake_for_workloads();
    runtime.announce();
    tracing::info!(workload = id, user = %actor.username, project = %new.project, gpus = new.gpus, "submitted");
    Ok(view)
}

/// Refuses requests no placement on the registered nodes could ever satisfy (DESIGN §4.8: up to
/// one node's GPUs on one node, more as whole nodes).
async fn check_fits(
    db: &mut AnyConnection,
    cluster: &crate::clusters::Cluster,
    gpus: u32,
) -> Result<(), ServerError> {
    let (nodes, largest, total) = repo::connected_capacity(&mut *db, cluster.cluster_id).await?;
    if nodes == 0 {
        let message = if cluster.cluster_id == crate::clusters::DEFAULT_ID {
            "No GPU node has connected yet, so nothing can run.".to_string()
        } else {
            format!(
                "No GPU node of cluster \"{}\" has connected yet, so nothing can run there.",
                cluster.name
            )
        };
        return Err(ServerError::invalid("gpus", message));
    }
    if i64::from(gpus) > total {
        return Err(ServerError::invalid(
            "gpus",
            format!(
                "{gpus} GPUs is more than the whole cluster{} has ({total}); the largest node has {largest}.",
                if cluster.cluster_id == crate::clusters::DEFAULT_ID {
                    String::new()
                } else {
                    format!(" \"{}\"", cluster.name)
                }
            ),
        ));
    }
    Ok(())
}

pub async fn cancel(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    id: i64,
) -> Result<WorkloadView, ServerError> {
    let workload = get(pool, id).await?;
    if workload.user_id != actor.id && !actor.is_admin() {
        return Err(ServerError::Forbidden(
            "Only the workload's owner or an admin can cancel it.".into(),
        ));
    }
    if !workload.is_active() {
        return Err(ServerError::conflict(
            "state",
            format!("The workload has already ended ({}).", workload.state),
        ));
    }
    let now = runtime.now();
    let write = runtime.writing_workloads();
    let mut tx = crate::db::begin_write(pool).await?;
    let nodes = apply::close_runs(&mut tx, id, "cancelled", now).await?;
    repo::leave_run(&mut *tx, id, WorkloadState::Cancelled, None, now).await?;
    let event = Event::Cancelled {
        by: actor.username.clone(),
    };
    repo::insert_event(&mut *tx, id, now, None, &event).await?;
    tx.commit().await?;
    write.committed([id]);
    runtime.wake_for_workloads();
    runtime.announce_nodes(nodes);
    get(pool, id).await
}

pub async fn get(pool: &AnyPool, id: i64) -> Result<WorkloadView, ServerError> {
    repo::find_workload(pool, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no workload {id}.")))
}

/// The workload with its placement, queue position, the ratios along its path, what it waits
/// for, its events and its output tail. Anyone signed in may read it; `can_cancel` and
/// `can_resubmit` say whether `actor` may cancel it or submit it again.
pub async fn detail(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    id: i64,
) -> Result<WorkloadDetail, ServerError> {
    let workload = get(pool, id).await?;
    let placement: Vec<GpuPlacement> = repo::placement(pool, id)
        .await?
        .into_iter()
        .map(|(node, gpus)| GpuPlacement {
            node,
            gpus: snapshot::parse_indices(&gpus),
        })
        .collect();
    let events = repo::events(pool, id).await?;
    let queue = if workload.state == WorkloadState::Queued {
        explain(pool, runtime, id).await?
    } else {
        None
    };
    let log_tail = repo::log_tail(pool, id).await?;
    let (output_removed_at, events_removed_at) = repo::removed_at(pool, id).await?;
    let (runs, ran_s, charged_gpu_s) = repo::run_totals(pool, id, runtime.now()).await?;
    let can_cancel = workload.is_active() && (workload.user_id == actor.id || actor.is_admin());
    let can_resubmit = !workload.is_active() && workload.user_id == actor.id;
    let leaving = leaving(pool, &workload, &placement, runtime.now()).await?;
    let estimated_start = if workload.state == WorkloadState::Queued {
        super::estimate::latest(pool, runtime, Some(id))
            .await?
            .and_then(|p| super::estimate::estimate_of(&p, id))
    } else {
        None
    };
    let utilization = repo::utilization(
        pool,
        id,
        workload.state == WorkloadState::Running,
        runtime.now(),
    )
    .await?;
    Ok(WorkloadDetail {
        utilization,
        leaving,
        estimated_start,
        workload,
        placement,
        queue,
        events,
        log_tail,
        can_cancel,
        can_resubmit,
        runs,
        ran_s,
        charged_gpu_h: charged_gpu_s as f64 / 3600.0,
        output_removed_at,
        events_removed_at,
    })
}

/// Whether a running workload sits on a node being drained, and when it will be stopped there.
async fn leaving(
    pool: &AnyPool,
    workload: &WorkloadView,
    placement: &[GpuPlacement],
    now: i64,
) -> Result<Option<Leaving>, ServerError> {
    if workload.state != WorkloadState::Running {
        return Ok(None);
    }
    for part in placement {
        let Some(node) = crate::nodes::repo::find_node_by_name(pool, &part.node).await? else {
            continue;
        };
        let state = node.health();
        if matches!(state, NodeHealth::Cordoned | NodeHealth::Unhealthy) {
            return Ok(Some(Leaving {
                node: part.node.clone(),
                state,
                at: workload.protected_until.unwrap_or(now).max(now),
            }));
        }
    }
    Ok(None)
}

async fn explain(
    pool: &AnyPool,
    runtime: &Runtime,
    id: i64,
) -> Result<Option<QueueExplanation>, ServerError> {
    let now = runtime.now();
    let since = runtime.queue_cache().generation();
    let mut served = page_snapshot(pool, runtime, since, Freshness::Coalesced).await?;
    if served.behind {
        // Built before the latest changes: enough to explain a workload it has queued, while one
        // submitted or requeued since needs a snapshot that knows it.
        let knows = served.value.as_ref().as_ref().is_some_and(|s| {
            s.of_workload(WorkloadId(id as u64))
                .and_then(|c| c.workload(WorkloadId(id as u64)))
                .is_some_and(|w| w.state == WorkloadState::Queued)
        });
        if !knows {
            served = page_snapshot(pool, runtime, since, Freshness::Strict).await?;
        }
    }
    let snaps = served.value;
    let Some(snap) = snaps
        .as_ref()
        .as_ref()
        .and_then(|s| s.of_workload(WorkloadId(id as u64)))
    else {
        return Ok(None);
    };
    let explanation = snap
        .engine
        .explain(&snap.state(), now, WorkloadId(id as u64))
        .map_err(|e| ServerError::Config(format!("the engine refused the snapshot: {e:?}")))?;
    let Some(e) = explanation else {
        return Ok(None);
    };
    let tree = &snap.tree.tree;
    let waiting_for = reasons::waiting_for(snap, &e.waiting_for);
    Ok(Some(QueueExplanation {
        position: e.position,
        queue_len: e.queue_len,
        leaf_rank: e.leaf_rank,
        path: e
            .path
            .iter()
            .map(|step| PathRatio {
                path: tree.path(step.node).to_string(),
                usage_gpu_h: step.usage / 3600.0,
                allocated_gpu_h: step.allocated / 3600.0,
                ratio: step.ratio.is_finite().then_some(step.ratio),
                recent_ratio: step.recent_ratio.is_finite().then_some(step.recent_ratio),
                sibling_rank: step.sibling_rank,
                siblings: step.siblings,
                ahead: step.ahead.map(|a| AheadSibling {
                    path: tree.path(a.node).to_string(),
                    ratio: a.ratio.is_finite().then_some(a.ratio),
                    recent_ratio: a.recent_ratio.is_finite().then_some(a.recent_ratio),
                }),
            })
            .collect(),
        waiting_for,
    }))
}

/// The queue in scheduler order: its first `limit` rows, and how many wait in all. Many people
/// watch it at once, so the order is computed once and shared until anything changes (the runtime
/// drops it on every wake-up and assignment change) or a second has passed; one request computes
/// while the others wait for its result. Each request then reads only the workloads it shows.
pub async fn queue(
    pool: &AnyPool,
    runtime: &Runtime,
    limit: usize,
    cluster: Option<&str>,
) -> Result<(Vec<QueueRow>, usize), ServerError> {
    let cluster = cluster_filter(pool, cluster).await?;
    let cache = runtime.queue_cache();
    let since = cache.generation();
    let served = cache
        .get_or_compute(&cache.order, since, Freshness::Coalesced, || {
            queue_order(pool, runtime, since)
        })
        .await?;
    if served.behind {
        runtime.served_behind();
    }
    let order: Vec<&QueueEntry> = served
        .value
        .iter()
        .filter(|e| {
            cluster
                .as_ref()
                .is_none_or(|c| c.cluster_id == e.cluster_id)
        })
        .collect();
    let shown = &order[..limit.min(order.len())];
    let rows = cache
        .head
        .get_or_read(
            &served.value,
            cluster.as_ref().map(|c| c.cluster_id),
            limit,
            || queue_rows(pool, runtime, shown),
        )
        .await?;
    Ok(((*rows).clone(), order.len()))
}

/// The Queue page's rows for these places in the order, read now.
async fn queue_rows(
    pool: &AnyPool,
    runtime: &Runtime,
    shown: &[&QueueEntry],
) -> Result<Vec<QueueRow>, ServerError> {
    let estimates = super::estimate::latest(pool, runtime, None).await?;
    let ids: Vec<i64> = shown.iter().map(|e| e.workload_id).collect();
    let mut db = pool.acquire().await?;
    let mut views: std::collections::HashMap<i64, _> = repo::find_workloads(&mut db, &ids)
        .await?
        .into_iter()
        .map(|w| (w.id, w))
        .collect();
    // A workload that started or ended since the order was computed is left out.
    Ok(shown
        .iter()
        .filter_map(|e| {
            let workload = views
                .remove(&e.workload_id)
                .filter(|w| w.state == WorkloadState::Queued)?;
            Some(QueueRow {
                position: e.position,
                workload,
                allocated: e.allocated,
                leaf_rank: e.leaf_rank,
                leaf_ratio: e.leaf_ratio,
                estimated_start: estimates
                    .as_deref()
                    .and_then(|p| super::estimate::estimate_of(p, e.workload_id)),
            })
        })
        .collect())
}

/// The cluster a list is filtered to: `None` for all; a name that is no cluster is refused.
pub async fn cluster_filter(
    pool: &AnyPool,
    name: Option<&str>,
) -> Result<Option<crate::clusters::Cluster>, ServerError> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let mut db = pool.acquire().await?;
    match crate::clusters::repo::find_by_name(&mut *db, name).await? {
        Some(cluster) => Ok(Some(cluster)),
        None => Err(ServerError::invalid(
            "cluster",
            format!("There is no cluster \"{name}\"."),
        )),
    }
}

/// The snapshot the pages read (the queue's order, why a workload waits): see
/// [`Runtime::page_source`]. Built at most once per change and second, whoever asks, or as
/// `freshness` allows (see `queue_cache`). `None` until a budget tree exists.
pub(crate) async fn page_snapshot(
    pool: &AnyPool,
    runtime: &Runtime,
    since: u64,
    freshness: Freshness,
) -> Result<Served<Option<snapshot::Snapshots>>, ServerError> {
    if let PageSource::Latest(value) = runtime.page_source(since) {
        return Ok(Served {
            value,
            behind: false,
        });
    }
    let cache = runtime.queue_cache();
    let served = cache
        .get_or_compute(&cache.snapshot, since, freshness, || async {
            // Decided once the request's turn has come: a pass may have read meanwhile.
            let base = match runtime.page_source(since) {
                PageSource::Latest(snapshot) => snapshot.as_ref().as_ref().map(|s| s.bases()),
                PageSource::Base(base) => Some(base),
                PageSource::Read => None,
            };
            runtime.metrics().page_snapshot(match base {
                Some(_) => PageSnapshot::Base,
                None => PageSnapshot::Read,
            });
            let mut db = crate::db::begin_read(pool).await?;
            let loaded = match base {
                Some(base) => Ok(Some(runtime.snapshot_on(&mut db, base).await?)),
                None => snapshot::load(&mut db, &runtime.config(), runtime.now()).await,
            };
            db.rollback().await?;
            loaded
        })
        .await?;
    if served.behind {
        runtime.served_behind();
    }
    Ok(served)
}

async fn queue_order(
    pool: &AnyPool,
    runtime: &Runtime,
    since: u64,
) -> Result<Vec<QueueEntry>, ServerError> {
    let now = runtime.now();
    let snap = page_snapshot(pool, runtime, since, Freshness::Strict)
        .await?
        .value;
    let Some(snaps) = snap.as_ref() else {
        return Ok(Vec::new());
    };
    // Each cluster's queue in its own order; the clusters' queues interleaved by position (each
    // one's first, then each one's second…), so a list cut at its first rows shows the head of
    // every cluster's queue, not only the first cluster's.
    let mut entries = Vec::new();
    for snap in &snaps.clusters {
        let standings = snap.engine.standings(now);
        let order = scheduler::fair_share_order(&snap.queued, &standings);
        entries.extend(order.into_iter().enumerate().map(|(i, at)| {
            let q = &snap.queued[at];
            QueueEntry {
                workload_id: q.id.0 as i64,
                cluster_id: snap.cluster.cluster_id,
                position: i + 1,
                allocated: q.is_allocated(),
                leaf_rank: standings.leaf_rank(q.leaf) + 1,
                leaf_ratio: Some(standings.ratio(q.leaf)).filter(|r| r.is_finite()),
            }
        }));
    }
    entries.sort_by_key(|e| (e.position, e.cluster_id));
    Ok(entries)
}

/// The projects (leaves) `actor` may submit to.
pub async fn my_projects(pool: &AnyPool, actor: &CurrentUser) -> Result<Vec<String>, ServerError> {
    Ok(budget_repo::member_leaves(pool, actor.id)
        .await?
        .into_iter()
        .map(|(_, path)| path)
        .collect())
}

/// The node's agent says a run's processes are all gone. Its GPUs are free from now on. If the
/// run was still open, the workload ends: succeeded on exit 0, failed otherwise — including when
/// the agent could not learn the exit status (`None`, said in `note`). Idempotent: a report for
/// a run the server already ended (preempted, drained, cancelled) only frees its GPUs.
///
/// Returns the nodes whose runs the end closed (every node of a multi-node workload; empty when
/// the workload had already ended): their agents must stop what still runs there.
#[allow(clippy::too_many_arguments)]
pub async fn finished(
    pool: &AnyPool,
    runtime: &Runtime,
    node_id: i64,
    run_id: i64,
    exit_code: Option<i32>,
    note: Option<&str>,
    by_agent: bool,
    now: i64,
) -> Result<Vec<i64>, ServerError> {
    let write = runtime.writing_workloads();
    let mut tx = crate::db::begin_write(pool).await?;
    let run = repo::run_on_node(&mut *tx, run_id, node_id).await?;
    let Some((workload_id, ended_at)) = run else {
        return Ok(Vec::new());
    };
    crate::agent::repo::release(&mut *tx, node_id, run_id, now).await?;
    if ended_at.is_some() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    if by_agent {
        // The node's agent stopped it (shutting down, or cut off from the server): the job did not
        // fail; it goes back to the queue if it can resume, like work on a node that went down.
        let (resumable, node) = repo::resumable_and_node(&mut *tx, workload_id, node_id).await?;
        let (state, then) = if resumable {
            (WorkloadState::Queued, AfterStop::Requeued)
        } else {
            (WorkloadState::Failed, AfterStop::Failed)
        };
        let nodes = apply::close_runs(&mut tx, workload_id, "killed", now).await?;
        repo::leave_run(&mut *tx, workload_id, state, exit_code, now).await?;
        let event = Event::Drained(Drain {
            rule: DrainRule::AgentStopped,
            at: now,
            node,
            node_reason: None,
            victim: None,
            victim_min_runtime_s: 0,
            victim_protected_until: None,
            note: note.map(str::to_string),
            then,
        });
        repo::insert_event(&mut *tx, workload_id, now, Some(node_id), &event).await?;
        tx.commit().await?;
        write.committed([workload_id]);
        return Ok(nodes);
    }
    if let Some(note) = note {
        append_output(
            &mut tx,
            workload_id,
            &format!("\n[hourglass agent] {note}\n"),
        )
        .await?;
    }
    let note = note.map(str::to_string);
    let (kind, state, event) = if exit_code == Some(0) {
        let event = Event::Succeeded { exit_code, note };
        ("completed", WorkloadState::Succeeded, event)
    } else {
        let event = Event::Failed { exit_code, note };
        ("failed", WorkloadState::Failed, event)
    };
    let nodes = apply::close_runs(&mut tx, workload_id, kind, now).await?;
    repo::leave_run(&mut *tx, workload_id, state, exit_code, now).await?;
    repo::insert_event(&mut *tx, workload_id, now, Some(node_id), &event).await?;
    tx.commit().await?;
    write.committed([workload_id]);
    Ok(nodes)
}

/// Appends output to the workload's log, keeping its last MiB.
pub async fn append_output(
    db: &mut sqlx::AnyConnection,
    workload_id: i64,
    text: &str,
) -> Result<(), ServerError> {
    if text.is_empty() {
        return Ok(());
    }
    const MAX: usize = 1 << 20;
    let log = repo::log_tail(&mut *db, workload_id).await?;
    let log = crate::agent::output::keep_tail(log, text, MAX);
    repo::set_log_tail(&mut *db, workload_id, &log).await?;
    Ok(())
}
