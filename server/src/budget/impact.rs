//! What-if for a change request (issue: "preview impact"): replay the last 14 days of real
//! submissions (the history the usage charts are booked from) through the simulator with the
//! current and with the proposed shares, and compare each affected leaf's share (in GPUs too),
//! delivered GPU-hours, usage ratio and p90 wait.

use super::{
    changes,
    repo::{self, Submission},
};
use crate::{clusters, nodes::repo as node_repo, ServerError};
use app::{
    budget::{ChangeAction, ImpactRow, ImpactView},
    model::CurrentUser,
};
use scheduler::{
    sim::{self, Cluster, ClusterNode, SimConfig, SimInput, TraceRow},
    BudgetTree, DAY,
};
use sqlx::AnyPool;
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

pub const DAYS: u32 = 14;

pub async fn impact(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    now: i64,
) -> Result<ImpactView, ServerError> {
    let request = changes::get(pool, actor, id).await?;
    let start = now - i64::from(DAYS) * DAY;
    // A change for one cluster is replayed on that cluster alone; one for every cluster on each
    // cluster in turn, with its own nodes, submissions and shares (accounting is per cluster).
    let only =
        match &request.cluster {
            Some(name) => Some(clusters::repo::find_by_name(pool, name).await?.ok_or_else(
                || ServerError::conflict("", format!("The cluster \"{name}\" is gone.")),
            )?),
            None => None,
        };
    let mut pools: BTreeMap<i64, Vec<ClusterNode>> = BTreeMap::new();
    for n in node_repo::list_nodes(pool).await? {
        if n.gpu_count > 0 && only.as_ref().is_none_or(|c| c.cluster_id == n.cluster_id) {
            pools.entry(n.cluster_id).or_default().push(ClusterNode {
                name: n.name,
                gpus: n.gpu_count as u32,
                gpu_model: Some(n.gpu_model).filter(|m| !m.is_empty()),
            });
        }
    }
    if pools.is_empty() {
        let message = match &only {
            Some(c) => format!(
                "No GPU node is registered in cluster \"{}\", so there is nothing to replay on.",
                c.name
            ),
            None => "No GPU node is registered, so there is no cluster to replay on.".to_string(),
        };
        return Err(ServerError::conflict("", message));
    }

    // Shares in force everywhere, and with the request applied to the node's children.
    let base = repo::shares_in_force(pool).await?;
    let prefix = if request.node.is_empty() {
        String::new()
    } else {
        format!("{}/", request.node)
    };
    let apply = |shares: &BTreeMap<String, f64>| {
        let mut proposed = shares.clone();
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
        proposed
    };
    let submissions = repo::submissions_since(pool, start).await?;

    let started = Instant::now();
    let (mut now_sum, mut proposed_sum) = (Replay::default(), Replay::default());
    let (mut total, mut used, mut affected) = (0u32, 0usize, BTreeSet::new());
    for (cluster_id, nodes) in pools {
        // This cluster's shares: the tree's, overridden where an approved change for it alone
        // says so. The request sets its children's shares here (a change for every cluster ends
        // their overrides); other nodes keep theirs.
        let mut current = base.clone();
        current.extend(repo::overrides_in_force_by_path(pool, cluster_id).await?);
        let proposed = apply(&current);
        affected.extend(
            proposed
                .keys()
                .chain(current.keys())
                .filter(|p| p.starts_with(&prefix) && !p.is_empty())
                .filter(|p| {
                    !proposed
                        .keys()
                        .chain(current.keys())
                        .any(|q| q.starts_with(&format!("{p}/")))
                })
                .cloned(),
        );
        let cluster = Cluster {
            nodes,
            outages: Vec::new(),
        };
        let gpus = cluster.total_gpus();
        let mine: Vec<&Submission> = submissions
            .iter()
            .filter(|s| s.cluster_id == cluster_id)
            .collect();
        let (now_run, n) = replay(&current, &cluster, &mine, start, now)?;
        let (proposed_run, _) = replay(&proposed, &cluster, &mine, start, now)?;
        now_sum.add(now_run, gpus);
        proposed_sum.add(proposed_run, gpus);
        total += gpus;
        used += n;
    }
    // Funded GPU-hours over the replay for a fraction of every replayed GPU.
    let funded = |fraction: f64| fraction * f64::from(total) * (now - start) as f64 / 3600.0;
    let ratio =
        |delivered: f64, fraction: f64| (fraction > 0.0).then(|| delivered / funded(fraction));
    let share = |run: &Replay, path: &str| {
        run.weighted.get(path).copied().unwrap_or(0.0) / f64::from(total.max(1))
    };
    let rows = affected
        .into_iter()
        .map(|path| {
            let share_now = share(&now_sum, &path);
            let share_proposed = share(&proposed_sum, &path);
            let delivered_now = now_sum.delivered.get(&path).copied().unwrap_or(0.0);
            let delivered_proposed = proposed_sum.delivered.get(&path).copied().unwrap_or(0.0);
            ImpactRow {
                share_now,
                share_proposed,
                delivered_now_gpu_h: delivered_now,
                delivered_proposed_gpu_h: delivered_proposed,
                ratio_now: ratio(delivered_now, share_now),
                ratio_proposed: ratio(delivered_proposed, share_proposed),
                p90_wait_now_s: p90(now_sum.waits.get(&path)),
                p90_wait_proposed_s: p90(proposed_sum.waits.get(&path)),
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

/// The 90th percentile of some waits, as the simulator's reports take it.
fn p90(waits: Option<&Vec<i64>>) -> Option<i64> {
    let mut sorted = waits?.clone();
    sorted.sort_unstable();
    scheduler::sim::WaitStats::of_sorted(&sorted).p90
}

/// One or more clusters' replays added up, by leaf path.
#[derive(Default)]
struct Replay {
    /// Each leaf's effective fraction of its cluster times that cluster's GPUs.
    weighted: BTreeMap<String, f64>,
    delivered: BTreeMap<String, f64>,
    /// Each workload's wait from submission to its first start.
    waits: BTreeMap<String, Vec<i64>>,
}

impl Replay {
    fn add(&mut self, other: Replay, gpus: u32) {
        for (path, fraction) in other.weighted {
            *self.weighted.entry(path).or_default() += fraction * f64::from(gpus);
        }
        for (path, h) in other.delivered {
            *self.delivered.entry(path).or_default() += h;
        }
        for (path, w) in other.waits {
            self.waits.entry(path).or_default().extend(w);
        }
    }
}

/// One fair-share replay of the submissions on `shares` on one cluster; returns each leaf's
/// fraction of it (not yet weighted), delivered GPU-hours and waits, and how many submissions it
/// used.
fn replay(
    shares: &BTreeMap<String, f64>,
    cluster: &Cluster,
    submissions: &[&Submission],
    start: i64,
    now: i64,
) -> Result<(Replay, usize), ServerError> {
    let total_gpus = cluster.total_gpus();
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
    Ok((
        Replay {
            weighted: fraction,
            delivered,
            waits,
        },
        used,
    ))
}
