//! Daily rollups of the hourly ledger per tree node. A day is rolled up on first read once it is
//! over; a late booking into one of its hours drops the rollup so the next read redoes it.

use super::repo;
use crate::{
    budget::snapshot::{with_overrides, TreeSnapshot, Trees},
    ServerError,
};
use scheduler::{BudgetId, DAY};
use sqlx::AnyConnection;
use std::collections::BTreeMap;

/// One node's totals over a span of hours, in GPU-seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, sqlx::FromRow)]
pub struct NodeTotals {
    pub charged_gpu_s: f64,
    pub unallocated_gpu_s: f64,
    pub owed_gpu_s: f64,
    pub tracked_gpu_s: f64,
    /// GPU time the agents sampled, and the same weighted by utilization.
    pub sampled_gpu_s: f64,
    pub utilized_gpu_s: f64,
}

impl NodeTotals {
    fn add(&mut self, other: &NodeTotals) {
        self.charged_gpu_s += other.charged_gpu_s;
        self.unallocated_gpu_s += other.unallocated_gpu_s;
        self.owed_gpu_s += other.owed_gpu_s;
        self.tracked_gpu_s += other.tracked_gpu_s;
        self.sampled_gpu_s += other.sampled_gpu_s;
        self.utilized_gpu_s += other.utilized_gpu_s;
    }
}

/// Every node's totals per cluster over `[from, to)`, computed from the hourly ledger. Leaves use
/// their stored hourly owed; inner nodes their own `min(f · C_h, demand_h)` hour by hour, with
/// the cluster's capacity and their leaves' demand there.
pub async fn compute(
    db: &mut AnyConnection,
    trees: &Trees,
    from: i64,
    to: i64,
) -> Result<BTreeMap<(i64, BudgetId), NodeTotals>, ServerError> {
    let tree = &trees.base;
    let capacity: BTreeMap<(i64, i64), f64> = repo::capacity_by_cluster(&mut *db, from, to)
        .await?
        .into_iter()
        .map(|(cluster, hour, gpu_s)| ((cluster, hour), gpu_s))
        .collect();
    let rows = repo::ledger_hours(&mut *db, from, to).await?;
    let t = &tree.tree;
    let mut totals: BTreeMap<(i64, BudgetId), NodeTotals> = BTreeMap::new();
    // Inner nodes: per cluster and hour, charged and demand summed over their leaves.
    let mut inner: BTreeMap<(i64, BudgetId, i64), (f64, f64)> = BTreeMap::new();
    for row in rows {
        let (cluster, leaf, hour) = (row.cluster_id, row.budget_node_id, row.hour);
        let (charged, free, demand, owed) = (
            row.charged_gpu_s,
            row.unallocated_gpu_s,
            row.demand_gpu_s,
            row.owed_gpu_s,
        );
        let Some(id) = tree.engine_id(leaf) else {
            continue;
        };
        let leaf_totals = NodeTotals {
            charged_gpu_s: charged,
            unallocated_gpu_s: free,
            owed_gpu_s: owed,
            tracked_gpu_s: charged.min(owed),
            sampled_gpu_s: row.sampled_gpu_s,
            utilized_gpu_s: row.utilized_gpu_s,
        };
        totals.entry((cluster, id)).or_default().add(&leaf_totals);
        let mut node = t.parent(id);
        while let Some(n) = node {
            totals.entry((cluster, n)).or_default().add(&NodeTotals {
                charged_gpu_s: charged,
                unallocated_gpu_s: free,
                sampled_gpu_s: row.sampled_gpu_s,
                utilized_gpu_s: row.utilized_gpu_s,
                ..NodeTotals::default()
            });
            let cell = inner.entry((cluster, n, hour)).or_insert((0.0, 0.0));
            cell.0 += charged;
            cell.1 += demand;
            node = t.parent(n);
        }
    }
    for ((cluster, node, hour), (charged, demand)) in inner {
        let c = capacity.get(&(cluster, hour)).copied().unwrap_or(0.0);
        // The cluster's own shares where it overrides any (the same nodes, the same ids).
        let funded = trees.of(cluster).tree.version_at(hour).fraction(node) * c;
        let owed = funded.min(demand);
        let entry = totals.entry((cluster, node)).or_default();
        entry.owed_gpu_s += owed;
        entry.tracked_gpu_s += charged.min(owed);
    }
    Ok(totals)
}

/// Rolls up every finished day in `[from, to)` not rolled up yet.
pub async fn ensure(
    db: &mut AnyConnection,
    tree: &TreeSnapshot,
    from: i64,
    to: i64,
    now: i64,
) -> Result<(), ServerError> {
    // Days before the first recorded capacity have nothing to add up: a period reaching back
    // before the history (a quarter begun before the server was, the trend's earlier quarters)
    // costs nothing and writes nothing.
    let Some(since) = repo::first_capacity_hour(&mut *db).await? else {
        return Ok(());
    };
    let first = from.max(since).div_euclid(DAY) * DAY;
    let last = to.min(now.div_euclid(DAY) * DAY);
    let done = repo::rolled_up_days(&mut *db, first, last).await?;
    if (first..last)
        .step_by(DAY as usize)
        .all(|d| done.contains(&d))
    {
        return Ok(());
    }
    let trees = with_overrides(db, tree.clone()).await?;
    let mut day = first;
    while day < last {
        if !done.contains(&day) {
            let totals = compute(db, &trees, day, day + DAY).await?;
            repo::clear_day(&mut *db, day).await?;
            for ((cluster, node), t) in &totals {
                repo::insert_node_day(&mut *db, tree.db_id(*node), *cluster, day, t).await?;
            }
            repo::mark_rolled_up(&mut *db, day, now).await?;
        }
        day += DAY;
    }
    Ok(())
}

/// Every node's totals over `[from, to)` on one cluster, or summed over all (`None`): stored
/// rollups for finished days, the ledger for the rest.
pub async fn totals(
    db: &mut AnyConnection,
    tree: &TreeSnapshot,
    from: i64,
    to: i64,
    now: i64,
    cluster: Option<i64>,
) -> Result<BTreeMap<BudgetId, NodeTotals>, ServerError> {
    ensure(db, tree, from, to, now).await?;
    let mut out: BTreeMap<BudgetId, NodeTotals> = BTreeMap::new();
    // Whole days are rolled up; partial edges (a period not on day boundaries) come from the ledger.
    let whole_from = from.div_euclid(DAY) * DAY + if from.rem_euclid(DAY) == 0 { 0 } else { DAY };
    let whole_to = to.min(now).div_euclid(DAY) * DAY;
    if whole_to > whole_from {
        let rows = repo::day_sums(&mut *db, whole_from, whole_to, cluster).await?;
        for (node, charged, free, owed, tracked, sampled, utilized) in rows {
            if let Some(id) = tree.engine_id(node) {
                out.entry(id).or_default().add(&NodeTotals {
                    charged_gpu_s: charged,
                    unallocated_gpu_s: free,
                    owed_gpu_s: owed,
                    tracked_gpu_s: tracked,
                    sampled_gpu_s: sampled,
                    utilized_gpu_s: utilized,
                });
            }
        }
    }
    let trees = with_overrides(db, tree.clone()).await?;
    for (a, b) in [
        (from, whole_from.min(to).max(from)),
        (whole_to.max(from), to),
    ] {
        if b > a {
            for ((c, id), t) in compute(db, &trees, a, b).await? {
                if cluster.is_none_or(|wanted| wanted == c) {
                    out.entry(id).or_default().add(&t);
                }
            }
        }
    }
    Ok(out)
}

/// A booking into `[from, to)` drops the rollups of the days it touches, so the next read rolls
/// them up again (only finished days are ever rolled up, so today's costs nothing).
pub async fn invalidate(db: &mut AnyConnection, from: i64, to: i64) -> Result<(), ServerError> {
    if to <= from {
        return Ok(());
    }
    repo::forget_rollups(
        &mut *db,
        from.div_euclid(DAY) * DAY,
        (to - 1).div_euclid(DAY) * DAY,
    )
    .await?;
    Ok(())
}

/// Rolls up the last few finished days if they are not yet (the runtime calls this every pass, so
/// reports never wait on history a running server has already seen).
pub async fn keep_up(db: &mut AnyConnection, now: i64) -> Result<(), ServerError> {
    let yesterday = now.div_euclid(DAY) * DAY - DAY;
    let done = repo::rolled_up_days(&mut *db, yesterday, yesterday + DAY).await?;
    if done.is_empty() {
        if let Some(tree) = crate::budget::snapshot::load(db).await? {
            ensure(db, &tree, yesterday - 2 * DAY, now, now).await?;
        }
    }
    Ok(())
}
