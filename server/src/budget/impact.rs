//! What-if for a change request (issue: "preview impact"): replay the last 14 days of real
//! submissions (the history the usage charts are booked from) through the simulator with the
//! current and with the proposed shares, and compare each affected leaf's share (in GPUs too),
//! delivered GPU-hours, usage ratio and p90 wait.

use super::{
    changes,
    repo::{self, Submission},
};
use crate::{nodes::repo as node_repo, ServerError};
use app::{
    budget::{ChangeAction, ImpactRow, ImpactView},
    model::CurrentUser,
};
use scheduler::{
    sim::{self, Cluster, ClusterNode, SimConfig, SimInput, TraceRow},
    BudgetTree, DAY,
};
use sqlx::AnyPool;
use std::{collections::BTreeMap, time::Instant};

pub const DAYS: u32 = 14;

pub async fn impact(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    now: i64,
) -> Result<ImpactView, ServerError> {
    let request = changes::get(pool, actor, id).await?;
    let start = now - i64::from(DAYS) * DAY;

    // Shares now, and with the request applied to the node's children.
    let current = repo::shares_in_force(pool).await?;
    let prefix = if request.node.is_empty() {
        String::new()
    } else {
        format!("{}/", request.node)
    };
    let mut proposed = current.clone();
    for item in &request.items {
        let path = format!("{prefix}{}", item.child);
        match (item.action, item.new_share) {
            (ChangeAction::Remove, _) => {
                proposed.retain(|p, _| *p != path && !p.starts_with(&format!("{path}/")));
            }
            (_, Some(share)) => {
                proposed.insert(path, share);
            }
            _ => {}
        }
    }

    let nodes: Vec<ClusterNode> = node_repo::list_nodes(pool)
        .await?
        .into_iter()
        .filter(|n| n.gpu_count > 0)
        .map(|n| ClusterNode {
            name: n.name,
            gpus: n.gpu_count as u32,
            gpu_model: Some(n.gpu_model).filter(|m| !m.is_empty()),
        })
        .collect();
    if nodes.is_empty() {
        return Err(ServerError::conflict(
            "",
            "No GPU node is registered, so there is no cluster to replay on.",
        ));
    }
    let cluster = Cluster {
        nodes,
        outages: Vec::new(),
    };
    let total = cluster.total_gpus();
    let submissions = repo::submissions_since(pool, start).await?;

    let started = Instant::now();
    let (now_run, used) = replay(&current, &cluster, &submissions, start, now, total)?;
    let (proposed_run, _) = replay(&proposed, &cluster, &submissions, start, now, total)?;
    let affected: Vec<String> = proposed
        .keys()
        .chain(current.keys())
        .filter(|p| p.starts_with(&prefix) && !p.is_empty())
        .filter(|p| {
            !proposed
                .keys()
                .chain(current.keys())
                .any(|q| q.starts_with(&format!("{p}/")))
        })
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // Funded GPU-hours over the replay for a fraction of the cluster.
    let funded = |fraction: f64| fraction * f64::from(total) * (now - start) as f64 / 3600.0;
    let ratio =
        |delivered: f64, fraction: f64| (fraction > 0.0).then(|| delivered / funded(fraction));
    let rows = affected
        .into_iter()
        .map(|path| {
            let share_now = now_run.fraction.get(&path).copied().unwrap_or(0.0);
            let share_proposed = proposed_run.fraction.get(&path).copied().unwrap_or(0.0);
            let delivered_now = now_run.delivered.get(&path).copied().unwrap_or(0.0);
            let delivered_proposed = proposed_run.delivered.get(&path).copied().unwrap_or(0.0);
            ImpactRow {
                share_now,
                share_proposed,
                delivered_now_gpu_h: delivered_now,
                delivered_proposed_gpu_h: delivered_proposed,
                ratio_now: ratio(delivered_now, share_now),
                ratio_proposed: ratio(delivered_proposed, share_proposed),
                p90_wait_now_s: now_run.p90_wait.get(&path).copied(),
                p90_wait_proposed_s: proposed_run.p90_wait.get(&path).copied(),
                path,
            }
        })
        .collect();
    Ok(ImpactView {
        days: DAYS,
        workloads: used,
        gpus: total,
        rows,
        wall_ms: started.elapsed().as_millis() as u64,
    })
}

struct Replay {
    /// Each leaf's effective fraction of the cluster under the replayed shares.
    fraction: BTreeMap<String, f64>,
    delivered: BTreeMap<String, f64>,
    p90_wait: BTreeMap<String, i64>,
}

/// One fair-share replay of the submissions on `shares`; returns per-leaf delivered GPU-hours and
/// p90 wait, and how many submissions it used.
fn replay(
    shares: &BTreeMap<String, f64>,
    cluster: &Cluster,
    submissions: &[Submission],
    start: i64,
    now: i64,
    total_gpus: u32,
) -> Result<(Replay, usize), ServerError> {
    let tree = BudgetTree::from_paths(shares.iter().map(|(path, share)| (path.as_str(), *share)))
        .map_err(|e| ServerError::Config(format!("what-if tree: {e}")))?;
    let mut trace = Vec::new();
    for s in submissions.iter().filter(|s| s.gpus as u32 <= total_gpus) {
        let Some(leaf) = tree.leaf(&s.project).ok() else {
            continue;
        };
        // The run time it needed: what it ran if it ended, what it has run (at least its minimum
        // runtime) if it still runs or waits.
        let ran = s.progress_s + s.started_at.map(|t| now - t).unwrap_or(0);
        let duration = if s.state.is_active() {
            ran.max(s.min_runtime_s).max(600)
        } else {
            ran.max(1)
        };
        trace.push(TraceRow {
            id: s.workload_id.to_string(),
            line: trace.len() + 2,
            submit: s.submitted_at - start,
            project: s.project.clone(),
            leaf,
            user: s.owner.clone(),
            gpus: s.gpus as u32,
            duration,
            min_runtime: s.min_runtime_s,
            resumable: s.resumable,
            priority: s.priority as i32,
        });
    }
    let used = trace.len();
    let fraction = tree
        .leaves()
        .map(|id| (tree.path(id).to_string(), tree.version_at(0).fraction(id)))
        .collect();
    let input = SimInput::new(tree, cluster.clone(), trace)
        .map_err(|e| ServerError::Config(format!("what-if input: {e}")))?;
    let output = sim::run(
        &input,
        &SimConfig {
            horizon: Some(now - start),
            ..SimConfig::default()
        },
    );
    let delivered = output
        .report
        .nodes
        .iter()
        .map(|n| (n.path.clone(), n.delivered_gpu_h))
        .collect();
    let mut first_start: BTreeMap<u32, i64> = BTreeMap::new();
    for seg in &output.segments {
        first_start
            .entry(seg.row)
            .and_modify(|t| *t = (*t).min(seg.start))
            .or_insert(seg.start);
    }
    let mut waits: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (i, row) in input.trace.iter().enumerate() {
        let began = first_start.get(&(i as u32)).copied().unwrap_or(now - start);
        waits
            .entry(row.project.clone())
            .or_default()
            .push(began - row.submit);
    }
    let p90_wait = waits
        .into_iter()
        .map(|(path, mut w)| {
            w.sort_unstable();
            let k = ((0.9 * w.len() as f64).ceil() as usize).clamp(1, w.len()) - 1;
            (path, w[k])
        })
        .collect();
    Ok((
        Replay {
            fraction,
            delivered,
            p90_wait,
        },
        used,
    ))
}
