//! Usage series for a node and its children, per hour or day: funded, owed, delivered and
//! unallocated GPU-hours — the data behind the allocation charts, and the CSV export.

use super::{csv_out, repo, rollup};
use crate::{budget::snapshot as tree_snapshot, clusters::Cluster, ServerError};
use app::reports::{ShareMark, UsageLine, UsageSeries};
use scheduler::{BudgetId, DAY, HOUR};
use sqlx::AnyPool;
use std::collections::{BTreeMap, BTreeSet};

pub const CSV_HEADER: &str =
    "bucket_start,path,funded_gpu_h,owed_gpu_h,delivered_gpu_h,unallocated_gpu_h,utilized_gpu_h,mean_utilization";

pub use app::reports::Granularity;

/// The granularity a query or form names; empty is a day.
pub fn parse_granularity(raw: &str) -> Result<Granularity, ServerError> {
    match raw.trim() {
        "hour" => Ok(Granularity::Hour),
        "day" | "" => Ok(Granularity::Day),
        "week" => Ok(Granularity::Week),
        other => Err(ServerError::invalid(
            "granularity",
            format!("Use hour, day or week, not \"{other}\"."),
        )),
    }
}

/// Bucket arithmetic in UTC.
pub trait Buckets {
    /// The start of the bucket after the one starting at `bucket`.
    fn next(self, bucket: i64) -> i64;
    /// The start of the bucket holding `t`.
    fn bucket(self, t: i64) -> i64;
}

impl Buckets for Granularity {
    fn next(self, bucket: i64) -> i64 {
        match self {
            Granularity::Hour => bucket + HOUR,
            Granularity::Day => bucket + DAY,
            Granularity::Week => bucket + 7 * DAY,
        }
    }

    fn bucket(self, t: i64) -> i64 {
        // 1970-01-05, the first Monday after the epoch.
        const MONDAY: i64 = 4 * DAY;
        match self {
            Granularity::Hour => t.div_euclid(HOUR) * HOUR,
            Granularity::Day => t.div_euclid(DAY) * DAY,
            Granularity::Week => (t - MONDAY).div_euclid(7 * DAY) * 7 * DAY + MONDAY,
        }
    }
}

/// The allocation chart's data: `node` (first line) and its children, one value per bucket, on
/// `cluster` alone or on every cluster together.
pub async fn usage_series(
    pool: &AnyPool,
    node: String,
    cluster: Option<&Cluster>,
    from: i64,
    to: i64,
    granularity: Granularity,
    now: i64,
) -> Result<UsageSeries, ServerError> {
    let cells = series(pool, &node, cluster, from, to, granularity, now).await?;
    let (buckets, lines) = pivot(&cells);
    let share_changes = share_changes(pool, &node, cluster, from, to).await?;
    Ok(UsageSeries {
        node,
        from,
        to,
        granularity,
        buckets,
        lines,
        share_changes,
        cluster: cluster.map(|c| c.name.clone()).unwrap_or_default(),
    })
}

/// Share versions of `node` and its children that took effect in `[from, to)`; on one cluster,
/// with the shares approved for it alone that took effect then (they override the tree's there).
async fn share_changes(
    pool: &AnyPool,
    node: &str,
    cluster: Option<&Cluster>,
    from: i64,
    to: i64,
) -> Result<Vec<ShareMark>, ServerError> {
    const OF_NODE_OR_CHILD: &str =
        "b.path <> '' and (b.path = $1 or b.parent_id = (select budget_node_id
         from budget_node where path = $1 and removed_at is null))";
    let mut rows: Vec<(i64, String, f64)> = sqlx::query_as(&format!(
        "select v.effective_from, b.path, v.share from share_version v
         join budget_node b on b.budget_node_id = v.budget_node_id
         where v.effective_from >= $2 and v.effective_from < $3 and {OF_NODE_OR_CHILD}"
    ))
    .bind(node)
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await?;
    if let Some(cluster) = cluster {
        let overrides: Vec<(i64, String, f64)> = sqlx::query_as(&format!(
            "select o.effective_from, b.path, o.share from share_override o
             join budget_node b on b.budget_node_id = o.budget_node_id
             where o.cluster_id = $4 and o.effective_from >= $2 and o.effective_from < $3
               and {OF_NODE_OR_CHILD}"
        ))
        .bind(node)
        .bind(from)
        .bind(to)
        .bind(cluster.cluster_id)
        .fetch_all(pool)
        .await?;
        // Where both took effect at once, the cluster's own share is the one in force there.
        rows.retain(|(at, path, _)| !overrides.iter().any(|o| o.0 == *at && o.1 == *path));
        rows.extend(overrides);
    }
    rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok(rows
        .into_iter()
        .map(|(at, path, share)| ShareMark { at, path, share })
        .collect())
}

/// Cells by `(bucket, path)` into the buckets and one line per path: the node itself (the
/// shortest path, a prefix of its children's) first, then its children by path.
fn pivot(cells: &BTreeMap<(i64, String), [f64; 4]>) -> (Vec<i64>, Vec<UsageLine>) {
    let buckets: Vec<i64> = cells
        .keys()
        .map(|(bucket, _)| *bucket)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let index: std::collections::HashMap<i64, usize> =
        buckets.iter().enumerate().map(|(i, b)| (*b, i)).collect();
    let mut lines: Vec<UsageLine> = Vec::new();
    for ((bucket, path), [funded, owed, delivered, free]) in cells {
        let at = match lines.iter().position(|l| &l.path == path) {
            Some(at) => at,
            None => {
                let empty = vec![0.0; buckets.len()];
                lines.push(UsageLine {
                    path: path.clone(),
                    funded: empty.clone(),
                    owed: empty.clone(),
                    delivered: empty.clone(),
                    unallocated: empty,
                });
                lines.len() - 1
            }
        };
        let (line, i) = (&mut lines[at], index[bucket]);
        line.funded[i] = *funded;
        line.owed[i] = *owed;
        line.delivered[i] = *delivered;
        line.unallocated[i] = *free;
    }
    lines.sort_by(|a, b| (a.path.len(), &a.path).cmp(&(b.path.len(), &b.path)));
    if lines.len() > 1 {
        lines[1..].sort_by(|a, b| a.path.cmp(&b.path));
    }
    (buckets, lines)
}

/// The tree node `node` names (empty: the root) followed by its children: the groups a series
/// has a line for.
fn groups(t: &scheduler::BudgetTree, node: &str) -> Result<Vec<BudgetId>, ServerError> {
    let root = t
        .find(node)
        .or_else(|| node.trim_matches('/').is_empty().then_some(BudgetId::ROOT))
        .ok_or_else(|| ServerError::invalid("node", format!("There is no node \"{node}\".")))?;
    let mut groups = vec![root];
    groups.extend_from_slice(t.children(root));
    Ok(groups)
}

/// `(bucket start, path) → [funded, owed, delivered, unallocated]` GPU-hours for `node` and its
/// children over `[from, to)`, on `cluster` alone or on every cluster together. Day and week
/// buckets take the days already over from the daily rollups (rolling up those not yet done);
/// hours, partial days and today come from the ledger.
pub async fn series(
    pool: &AnyPool,
    node: &str,
    cluster: Option<&Cluster>,
    from: i64,
    to: i64,
    granularity: Granularity,
    now: i64,
) -> Result<BTreeMap<(i64, String), [f64; 4]>, ServerError> {
    if to <= from || to - from > 400 * DAY {
        return Err(ServerError::invalid(
            "to",
            "The period must be positive and at most 400 days.",
        ));
    }
    let mut db = pool.acquire().await?;
    let Some(tree) = tree_snapshot::load(&mut db).await? else {
        return Ok(BTreeMap::new());
    };
    let t = &tree.tree;
    let groups = groups(t, node)?;
    // Each cluster is owed its share of its own capacity, with its own shares where a change for
    // it alone overrides the tree's, as the ledger and the daily rollups reckon it.
    let trees = tree_snapshot::with_overrides(&mut db, tree.clone()).await?;
    let mut capacity: BTreeMap<i64, Vec<(i64, f64)>> = BTreeMap::new();
    let only = cluster.map(|c| c.cluster_id);
    let counted = |id: i64| only.is_none_or(|only| only == id);
    for (cluster, hour, gpu_s) in repo::capacity_by_cluster(&mut *db, from, to).await? {
        if counted(cluster) {
            capacity.entry(hour).or_default().push((cluster, gpu_s));
        }
    }
    // Whole days the rollups hold, with each group's delivered, unallocated and owed per day.
    let mut rolled: BTreeSet<i64> = BTreeSet::new();
    let mut daily: BTreeMap<(usize, i64), [f64; 3]> = BTreeMap::new();
    if granularity != Granularity::Hour {
        let first = from.div_euclid(DAY) * DAY + if from.rem_euclid(DAY) == 0 { 0 } else { DAY };
        let last = to.min(now).div_euclid(DAY) * DAY;
        if last > first {
            rollup::ensure(&mut db, &tree, first, last, now).await?;
            rolled = repo::rolled_up_days(&mut *db, first, last)
                .await?
                .into_iter()
                .collect();
            let ids: Vec<i64> = groups.iter().map(|g| tree.db_id(*g)).collect();
            for (node, day, charged, free, owed) in
                repo::node_days(&mut *db, first, last, &ids, only).await?
            {
                if let Some(g) = tree
                    .engine_id(node)
                    .and_then(|id| groups.iter().position(|g| *g == id))
                {
                    // One row per cluster the node used that day.
                    let cell = daily.entry((g, day)).or_insert([0.0; 3]);
                    cell[0] += charged;
                    cell[1] += free;
                    cell[2] += owed;
                }
            }
        }
    }
    // The rest of the period from the ledger, one read per stretch of days not rolled up.
    let mut rows = Vec::new();
    let mut stretch = from;
    while stretch < to {
        let day = stretch.div_euclid(DAY) * DAY;
        if rolled.contains(&day) {
            stretch = day + DAY;
            continue;
        }
        let mut end = (day + DAY).min(to);
        while end < to && !rolled.contains(&end) {
            end = (end + DAY).min(to);
        }
        rows.extend(
            repo::ledger_hours(&mut *db, stretch, end)
                .await?
                .into_iter()
                .filter(|row| counted(row.cluster_id)),
        );
        stretch = end;
    }
    // Per group and hour: delivered, unallocated, and a leaf's owed as the ledger booked it; per
    // inner group, hour and cluster: demand (what it is owed is worked out below, per cluster).
    let mut hourly: BTreeMap<(usize, i64), [f64; 3]> = BTreeMap::new();
    let mut demand: BTreeMap<(usize, i64, i64), f64> = BTreeMap::new();
    for row in rows {
        let Some(id) = tree.engine_id(row.budget_node_id) else {
            continue;
        };
        let path = t.path_ids(id);
        for (g, group) in groups.iter().enumerate() {
            if *group == BudgetId::ROOT || path.contains(group) {
                let cell = hourly.entry((g, row.hour)).or_insert([0.0; 3]);
                cell[0] += row.charged_gpu_s;
                cell[1] += row.unallocated_gpu_s;
                if *group == id {
                    cell[2] += row.owed_gpu_s;
                } else {
                    *demand.entry((g, row.hour, row.cluster_id)).or_default() += row.demand_gpu_s;
                }
            }
        }
    }
    let mut out: BTreeMap<(i64, String), [f64; 4]> = BTreeMap::new();
    let mut hour = from.div_euclid(HOUR) * HOUR;
    while hour < to {
        let on = capacity.get(&hour).map_or(&[][..], Vec::as_slice);
        let bucket = granularity.bucket(hour);
        let day = hour.div_euclid(DAY) * DAY;
        let from_rollup = rolled.contains(&day);
        for (g, group) in groups.iter().enumerate() {
            // Each cluster's funded time for the group this hour.
            let funded_on = |cluster: i64, gpu_s: f64| {
                trees.of(cluster).tree.version_at(hour).fraction(*group) * gpu_s
            };
            let funded: f64 = on.iter().map(|&(c, gpu_s)| funded_on(c, gpu_s)).sum();
            let cell = out
                .entry((bucket, t.path(*group).to_string()))
                .or_insert([0.0; 4]);
            cell[0] += funded / HOUR as f64;
            if from_rollup {
                // The day's totals once, with its first hour.
                if hour == day {
                    let [delivered, free, owed] = daily.get(&(g, day)).copied().unwrap_or([0.0; 3]);
                    cell[1] += owed / HOUR as f64;
                    cell[2] += delivered / HOUR as f64;
                    cell[3] += free / HOUR as f64;
                }
                continue;
            }
            let [delivered, free, leaf_owed] = hourly.get(&(g, hour)).copied().unwrap_or([0.0; 3]);
            let owed = if t.is_leaf(*group) {
                leaf_owed
            } else {
                on.iter()
                    .map(|&(c, gpu_s)| {
                        let asked = demand.get(&(g, hour, c)).copied().unwrap_or(0.0);
                        funded_on(c, gpu_s).min(asked)
                    })
                    .sum()
            };
            cell[1] += owed / HOUR as f64;
            cell[2] += delivered / HOUR as f64;
            cell[3] += free / HOUR as f64;
        }
        hour += HOUR;
    }
    Ok(out)
}

/// `(bucket start, path) → (GPU-seconds sampled, the same weighted by utilization)` for `node`
/// and its children over `[from, to)`, from the hours the agents sampled (see
/// [`crate::agent::utilization`]): the mean utilization of delivered time is their quotient. On
/// `cluster` alone or on every cluster together.
pub async fn utilization(
    pool: &AnyPool,
    node: &str,
    cluster: Option<&Cluster>,
    from: i64,
    to: i64,
    granularity: Granularity,
) -> Result<BTreeMap<(i64, String), (f64, f64)>, ServerError> {
    let mut db = pool.acquire().await?;
    let Some(tree) = tree_snapshot::load(&mut db).await? else {
        return Ok(BTreeMap::new());
    };
    let t = &tree.tree;
    let groups = groups(t, node)?;
    let rows: Vec<(i64, i64, f64, f64)> = sqlx::query_as(
        "select budget_node_id, hour, sampled_gpu_s, utilized_gpu_s from usage_hour
         where hour >= $1 and hour < $2 and sampled_gpu_s > 0 and ($3 is null or cluster_id = $3)",
    )
    .bind(from.div_euclid(HOUR) * HOUR)
    .bind(to)
    .bind(cluster.map(|c| c.cluster_id))
    .fetch_all(&mut *db)
    .await?;
    let mut out: BTreeMap<(i64, String), (f64, f64)> = BTreeMap::new();
    for (leaf, hour, sampled, utilized) in rows {
        let Some(id) = tree.engine_id(leaf) else {
            continue;
        };
        let path = t.path_ids(id);
        for group in &groups {
            if *group == BudgetId::ROOT || path.contains(group) {
                let cell = out
                    .entry((granularity.bucket(hour), t.path(*group).to_string()))
                    .or_default();
                cell.0 += sampled;
                cell.1 += utilized;
            }
        }
    }
    Ok(out)
}

/// The usage series as CSV, one line per bucket and node, with its utilization where the agents
/// sampled its GPUs (empty cells where they did not).
pub fn csv(
    series: &BTreeMap<(i64, String), [f64; 4]>,
    utilization: &BTreeMap<(i64, String), (f64, f64)>,
) -> String {
    let mut out = csv::Writer::from_writer(Vec::new());
    let _ = out.write_record(CSV_HEADER.split(','));
    for (key, [funded, owed, delivered, free]) in series {
        let (bucket, path) = key;
        let (utilized_h, mean) = match utilization.get(key) {
            Some(&(sampled, utilized)) if sampled > 0.0 => (
                format!("{:.4}", utilized / 3600.0),
                format!("{:.4}", utilized / sampled),
            ),
            _ => (String::new(), String::new()),
        };
        let _ = out.write_record([
            iso(*bucket),
            csv_out::text_cell(path),
            format!("{funded:.4}"),
            format!("{owed:.4}"),
            format!("{delivered:.4}"),
            format!("{free:.4}"),
            utilized_h,
            mean,
        ]);
    }
    csv_out::written(out)
}

pub use super::calendar::iso;
