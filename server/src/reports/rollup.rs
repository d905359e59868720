//! Daily rollups of the hourly ledger per tree node. A day is rolled up on first read once it is
//! over; a late booking into one of its hours drops the rollup so the next read redoes it.

use crate::{budget::snapshot::TreeSnapshot, ServerError};
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
}

impl NodeTotals {
    fn add(&mut self, other: &NodeTotals) {
        self.charged_gpu_s += other.charged_gpu_s;
        self.unallocated_gpu_s += other.unallocated_gpu_s;
        self.owed_gpu_s += other.owed_gpu_s;
        self.tracked_gpu_s += other.tracked_gpu_s;
    }
}

/// Every node's totals over `[from, to)`, computed from the hourly ledger. Leaves use their stored
/// hourly owed; inner nodes their own `min(f · C_h, demand_h)` hour by hour.
pub async fn compute(
    db: &mut AnyConnection,
    tree: &TreeSnapshot,
    from: i64,
    to: i64,
) -> Result<BTreeMap<BudgetId, NodeTotals>, ServerError> {
    let capacity: BTreeMap<i64, f64> = sqlx::query_as::<_, (i64, f64)>(
        "select hour, healthy_gpu_s from capacity_hour where hour >= $1 and hour < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .collect();
    let rows: Vec<(i64, i64, f64, f64, f64, f64)> = sqlx::query_as(
        "select budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s
         from usage_hour where hour >= $1 and hour < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut *db)
    .await?;
    let t = &tree.tree;
    let mut totals: BTreeMap<BudgetId, NodeTotals> = BTreeMap::new();
    // Inner nodes: per hour, charged and demand summed over their leaves.
    let mut inner: BTreeMap<(BudgetId, i64), (f64, f64)> = BTreeMap::new();
    for (leaf, hour, charged, free, demand, owed) in rows {
        let Some(id) = tree.engine_id(leaf) else {
            continue;
        };
        let leaf_totals = NodeTotals {
            charged_gpu_s: charged,
            unallocated_gpu_s: free,
            owed_gpu_s: owed,
            tracked_gpu_s: charged.min(owed),
        };
        totals.entry(id).or_default().add(&leaf_totals);
        let mut node = t.parent(id);
        while let Some(n) = node {
            totals.entry(n).or_default().add(&NodeTotals {
                charged_gpu_s: charged,
                unallocated_gpu_s: free,
                ..NodeTotals::default()
            });
            let cell = inner.entry((n, hour)).or_insert((0.0, 0.0));
            cell.0 += charged;
            cell.1 += demand;
            node = t.parent(n);
        }
    }
    for ((node, hour), (charged, demand)) in inner {
        let funded =
            t.version_at(hour).fraction(node) * capacity.get(&hour).copied().unwrap_or(0.0);
        let owed = funded.min(demand);
        let entry = totals.entry(node).or_default();
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
    let first = from.div_euclid(DAY) * DAY;
    let last = to.min(now.div_euclid(DAY) * DAY);
    let done: Vec<i64> =
        sqlx::query_scalar("select day from rollup_day where day >= $1 and day < $2")
            .bind(first)
            .bind(last)
            .fetch_all(&mut *db)
            .await?;
    let mut day = first;
    while day < last {
        if !done.contains(&day) {
            let totals = compute(db, tree, day, day + DAY).await?;
            sqlx::query("delete from node_day where day = $1")
                .bind(day)
                .execute(&mut *db)
                .await?;
            for (node, t) in &totals {
                sqlx::query(
                    "insert into node_day (budget_node_id, day, charged_gpu_s, unallocated_gpu_s, owed_gpu_s, tracked_gpu_s)
                     values ($1, $2, $3, $4, $5, $6)",
                )
                .bind(tree.db_id(*node))
                .bind(day)
                .bind(t.charged_gpu_s)
                .bind(t.unallocated_gpu_s)
                .bind(t.owed_gpu_s)
                .bind(t.tracked_gpu_s)
                .execute(&mut *db)
                .await?;
            }
            sqlx::query("insert into rollup_day (day, rolled_at) values ($1, $2) on conflict (day) do update set rolled_at = excluded.rolled_at")
                .bind(day)
                .bind(now)
                .execute(&mut *db)
                .await?;
        }
        day += DAY;
    }
    Ok(())
}

/// Every node's totals over `[from, to)`: stored rollups for finished days, the ledger for the rest.
pub async fn totals(
    db: &mut AnyConnection,
    tree: &TreeSnapshot,
    from: i64,
    to: i64,
    now: i64,
) -> Result<BTreeMap<BudgetId, NodeTotals>, ServerError> {
    ensure(db, tree, from, to, now).await?;
    let mut out: BTreeMap<BudgetId, NodeTotals> = BTreeMap::new();
    // Whole days are rolled up; partial edges (a period not on day boundaries) come from the ledger.
    let whole_from = from.div_euclid(DAY) * DAY + if from.rem_euclid(DAY) == 0 { 0 } else { DAY };
    let whole_to = to.min(now).div_euclid(DAY) * DAY;
    if whole_to > whole_from {
        let rows: Vec<(i64, f64, f64, f64, f64)> = sqlx::query_as(
            "select budget_node_id, sum(charged_gpu_s), sum(unallocated_gpu_s), sum(owed_gpu_s), sum(tracked_gpu_s)
             from node_day where day >= $1 and day < $2 group by budget_node_id",
        )
        .bind(whole_from)
        .bind(whole_to)
        .fetch_all(&mut *db)
        .await?;
        for (node, charged, free, owed, tracked) in rows {
            if let Some(id) = tree.engine_id(node) {
                out.entry(id).or_default().add(&NodeTotals {
                    charged_gpu_s: charged,
                    unallocated_gpu_s: free,
                    owed_gpu_s: owed,
                    tracked_gpu_s: tracked,
                });
            }
        }
    }
    for (a, b) in [
        (from, whole_from.min(to).max(from)),
        (whole_to.max(from), to),
    ] {
        if b > a {
            for (id, t) in compute(db, tree, a, b).await? {
                out.entry(id).or_default().add(&t);
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
    sqlx::query("delete from rollup_day where day >= $1 and day <= $2")
        .bind(from.div_euclid(DAY) * DAY)
        .bind((to - 1).div_euclid(DAY) * DAY)
        .execute(&mut *db)
        .await?;
    Ok(())
}

/// Rolls up the last few finished days if they are not yet (the runtime calls this every pass, so
/// reports never wait on history a running server has already seen).
pub async fn keep_up(db: &mut AnyConnection, now: i64) -> Result<(), ServerError> {
    let yesterday = now.div_euclid(DAY) * DAY - DAY;
    let done: Option<i64> = sqlx::query_scalar("select day from rollup_day where day = $1")
        .bind(yesterday)
        .fetch_optional(&mut *db)
        .await?;
    if done.is_none() {
        if let Some(tree) = crate::budget::snapshot::load(db).await? {
            ensure(db, &tree, yesterday - 2 * DAY, now, now).await?;
        }
    }
    Ok(())
}
