//! The quarterly review: per tree node funded, owed, delivered, unallocated and waits; the
//! reference's headline figures.

use super::{
    repo,
    rollup::{self, NodeTotals},
    waits,
};
use crate::clusters::Cluster;
use crate::{budget::snapshot as tree_snapshot, ServerError};
use app::{
    calendar::Fiscal,
    reports::{ClusterHeadline, Headline, Review, ReviewRow},
};
use scheduler::{sim::WaitStats, BudgetId, HOUR};
use sqlx::AnyPool;

/// The review of quarter `quarter` (1–4) of fiscal year `year` in `fiscal`'s calendar, labelled
/// `Q4 2026` (or `Q1 FY2027`); without them, the quarter `now` falls in.
pub async fn quarter(
    pool: &AnyPool,
    fiscal: Fiscal,
    year_quarter: Option<(i32, u32)>,
    now: i64,
    scope: Scope<'_>,
) -> Result<Review, ServerError> {
    let (year, quarter) = year_quarter.unwrap_or_else(|| fiscal.quarter_of(now));
    let (from, to) = fiscal
        .quarter(year, quarter)
        .ok_or_else(|| ServerError::invalid("quarter", "A quarter is 1, 2, 3 or 4."))?;
    let label = fiscal.quarter_label(year, quarter);
    let mut review = review_of(pool, from, to, label, now, scope).await?;
    review.fiscal_start_month = fiscal.start_month();
    review.quarter = Some((year, quarter));
    Ok(review)
}

/// The longest period one review covers.
pub const MAX_PERIOD_DAYS: i64 = 3 * 366;

/// The review of any period `[from, to)` people ask for, labelled by its days; `to` must come
/// after `from` and the period last at most [`MAX_PERIOD_DAYS`].
pub async fn period(
    pool: &AnyPool,
    fiscal: Fiscal,
    from: i64,
    to: i64,
    now: i64,
    scope: Scope<'_>,
) -> Result<Review, ServerError> {
    if to <= from {
        return Err(ServerError::invalid(
            "to",
            "to: the period must end after it starts.",
        ));
    }
    if to - from > MAX_PERIOD_DAYS * 86_400 {
        return Err(ServerError::invalid(
            "to",
            format!("to: a review covers at most {MAX_PERIOD_DAYS} days."),
        ));
    }
    let label = app::calendar::period_label(from, to);
    let mut review = review_of(pool, from, to, label, now, scope).await?;
    review.fiscal_start_month = fiscal.start_month();
    Ok(review)
}

/// The review of `[from, to)` over every cluster.
pub async fn review(
    pool: &AnyPool,
    from: i64,
    to: i64,
    label: String,
    now: i64,
) -> Result<Review, ServerError> {
    review_of(pool, from, to, label, now, Scope::All).await
}

/// What a review covers.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Every cluster together.
    All,
    /// Every cluster together, and each one's headline beside it where more than one had
    /// capacity in the period (the Reports page and the API; the Overview and the trend need
    /// only the total, so they do not pay for it).
    AllAndEach,
    /// One cluster.
    One(&'a Cluster),
}

impl<'a> Scope<'a> {
    /// One cluster when `cluster` names one; otherwise all, with each one's headline if `each`.
    pub fn of(cluster: Option<&'a Cluster>, each: bool) -> Scope<'a> {
        match (cluster, each) {
            (Some(c), _) => Scope::One(c),
            (None, true) => Scope::AllAndEach,
            (None, false) => Scope::All,
        }
    }

    fn cluster(self) -> Option<&'a Cluster> {
        match self {
            Scope::One(c) => Some(c),
            Scope::All | Scope::AllAndEach => None,
        }
    }
}

/// The review of `[from, to)` in `scope`.
pub async fn review_of(
    pool: &AnyPool,
    from: i64,
    to: i64,
    label: String,
    now: i64,
    scope: Scope<'_>,
) -> Result<Review, ServerError> {
    let cluster = scope.cluster();
    let mut db = pool.acquire().await?;
    // A cluster added later has data since it was.
    let data_since = repo::first_capacity_hour_of(&mut *db, cluster.map(|c| c.cluster_id)).await?;
    let Some(tree) = tree_snapshot::load(&mut db).await? else {
        return Ok(Review {
            from,
            to,
            label,
            headline: headline(&[], 0.0, 0.0, 0.0, 0.0, None),
            rows: Vec::new(),
            data_since,
            quarter: None,
            fiscal_start_month: 1,
            cluster: cluster.map(|c| c.name.clone()),
            clusters: Vec::new(),
        });
    };
    let submitted = waits::submitted_between(&mut db, from, to, now).await?;
    let (headline, rows) =
        figures(&mut db, &tree, from, to, now, cluster, &submitted, true).await?;
    let clusters = match scope {
        Scope::AllAndEach => each_cluster(&mut db, &tree, from, to, now, &submitted).await?,
        Scope::All | Scope::One(_) => Vec::new(),
    };
    Ok(Review {
        from,
        to,
        label,
        headline,
        rows,
        data_since,
        quarter: None,
        fiscal_start_month: 1,
        cluster: cluster.map(|c| c.name.clone()),
        clusters,
    })
}

/// Each cluster's headline over `[from, to)`, where more than one had capacity in it (none
/// otherwise: the total is that one cluster's).
async fn each_cluster(
    db: &mut sqlx::AnyConnection,
    tree: &tree_snapshot::TreeSnapshot,
    from: i64,
    to: i64,
    now: i64,
    submitted: &[waits::Wait],
) -> Result<Vec<ClusterHeadline>, ServerError> {
    let used = crate::clusters::repo::with_capacity_between(&mut *db, from, to).await?;
    if used.len() < 2 {
        return Ok(Vec::new());
    }
    let mut clusters = Vec::new();
    for cluster in crate::clusters::repo::all(&mut *db)
        .await?
        .iter()
        .filter(|c| used.contains(&c.cluster_id))
    {
        let (headline, _) =
            figures(db, tree, from, to, now, Some(cluster), submitted, false).await?;
        clusters.push(ClusterHeadline {
            name: cluster.name.clone(),
            headline,
        });
    }
    Ok(clusters)
}

/// The headline and (when `with_rows`) the per-node rows of `[from, to)` on `scope`.
#[allow(clippy::too_many_arguments)]
async fn figures(
    db: &mut sqlx::AnyConnection,
    tree: &tree_snapshot::TreeSnapshot,
    from: i64,
    to: i64,
    now: i64,
    scope: Option<&Cluster>,
    submitted: &[waits::Wait],
    with_rows: bool,
) -> Result<(Headline, Vec<ReviewRow>), ServerError> {
    let id = scope.map(|c| c.cluster_id);
    let capacity_total = repo::capacity_sum(&mut *db, from, to, id).await?;
    let totals = rollup::totals(&mut *db, tree, from, to, now, id).await?;
    let submitted: Vec<&waits::Wait> = submitted
        .iter()
        .filter(|w| id.is_none_or(|c| c == w.cluster))
        .collect();

    let t = &tree.tree;
    let end = to.min(now);
    // Each workload's wait under its leaf, once: a node's waits are its subtree's leaves'.
    let by_subtree = with_rows.then(|| SubtreeWaits::group(tree, &submitted));
    let mut scratch: Vec<i64> = Vec::new();
    // Each cluster's capacity in runs of hours under one share version of the tree it funds
    // with (its own where it overrides shares), so each node's funded time is a sum of a few
    // products instead of a lookup per hour.
    let trees = crate::budget::snapshot::with_overrides(&mut *db, tree.clone()).await?;
    let mut by_version: Vec<(i64, usize, f64)> = Vec::new();
    let clusters = crate::clusters::repo::with_capacity_between(&mut *db, from, to).await?;
    for cluster in clusters.into_iter().filter(|c| id.is_none_or(|i| i == *c)) {
        // Version `v` funds the hours from its start to the next one's (the first, all before).
        let versions = trees.of(cluster).tree.versions();
        for v in 0..versions.len() {
            let start = if v == 0 {
                from
            } else {
                versions[v].effective_from.max(from)
            };
            let end = versions.get(v + 1).map_or(to, |n| n.effective_from.min(to));
            if end > start {
                let gpu_s = repo::capacity_sum(&mut *db, start, end, Some(cluster)).await?;
                by_version.push((cluster, v, gpu_s));
            }
        }
    }

    // The shares at the period's ends: one cluster's own where it overrides them, else the tree's.
    let shares = match id {
        Some(cluster) => &trees.of(cluster).tree,
        None => t,
    };
    let mut rows = Vec::new();
    let mut stack = vec![(BudgetId::ROOT, 0usize)];
    while let Some((id, depth)) = stack.pop().filter(|_| with_rows) {
        let mut kids = t.children(id).to_vec();
        kids.sort_by(|a, b| t.name(*b).cmp(t.name(*a)));
        stack.extend(kids.into_iter().map(|k| (k, depth + 1)));
        if id == BudgetId::ROOT {
            continue;
        }
        let path = t.path(id).to_string();
        let node = totals.get(&id).copied().unwrap_or_default();
        let funded: f64 = by_version
            .iter()
            .map(|&(cluster, version, gpu_s)| {
                trees.of(cluster).tree.versions()[version].fraction(id) * gpu_s
            })
            .sum();
        let share_at_start = shares.version_at(from).fraction(id);
        let share_at_end = shares.version_at(end - 1).fraction(id);
        let (delivered, unallocated, owed) =
            (node.charged_gpu_s, node.unallocated_gpu_s, node.owed_gpu_s);
        scratch.clear();
        if let Some(by_subtree) = &by_subtree {
            scratch.extend_from_slice(by_subtree.of(id));
        }
        let stats = WaitStats::of_unsorted(&mut scratch);
        // GPU time sampled under the node, and the same weighted by utilization (the rollups
        // sum them up the tree as they do charges).
        let (sampled_s, utilized_s) = (node.sampled_gpu_s, node.utilized_gpu_s);
        rows.push(ReviewRow {
            fraction: if capacity_total > 0.0 {
                funded / capacity_total
            } else {
                share_at_end
            },
            share_at_start,
            share_at_end,
            depth,
            leaf: t.is_leaf(id),
            funded_gpu_h: funded / HOUR as f64,
            owed_gpu_h: owed / HOUR as f64,
            delivered_gpu_h: delivered / HOUR as f64,
            delivered_over_owed: (owed > 0.0).then(|| delivered / owed),
            unallocated_gpu_h: unallocated / HOUR as f64,
            wait_p50_s: stats.p50,
            wait_p90_s: stats.p90,
            utilization: (sampled_s > 0.0).then(|| utilized_s / sampled_s),
            utilized_gpu_h: utilized_s / HOUR as f64,
            path,
        });
    }
    let leaves: Vec<NodeTotals> = t
        .leaves()
        .filter_map(|leaf| totals.get(&leaf).copied())
        .collect();
    let charged: f64 = leaves.iter().map(|l| l.charged_gpu_s).sum();
    let free: f64 = leaves.iter().map(|l| l.unallocated_gpu_s).sum();
    let tracked: f64 = leaves.iter().map(|l| l.tracked_gpu_s).sum();
    let teams: Vec<(f64, f64)> = leaves
        .iter()
        .filter(|l| l.owed_gpu_s > 0.0)
        .map(|l| (l.charged_gpu_s, l.owed_gpu_s))
        .collect();
    let mut debug: Vec<i64> = submitted
        .iter()
        .filter(|w| w.debug)
        .map(|w| w.wait_s)
        .collect();
    let mut headline = headline(
        &teams,
        tracked,
        capacity_total,
        charged,
        free,
        WaitStats::of_unsorted(&mut debug).p90,
    );
    let sampled_s: f64 = leaves.iter().map(|l| l.sampled_gpu_s).sum();
    let utilized_s: f64 = leaves.iter().map(|l| l.utilized_gpu_s).sum();
    headline.utilization = (sampled_s > 0.0).then(|| utilized_s / sampled_s);
    headline.sampled_gpu_h = sampled_s / HOUR as f64;
    headline.capacity_gpu_h = capacity_total / HOUR as f64;
    Ok((headline, rows))
}

/// The leaves of `id`'s subtree (`id` itself when it is one).
/// Waits grouped by leaf, the leaves in depth-first order, so that every node's subtree holds one
/// contiguous run of them: a node's waits are a slice, not a gathering (a quarter at 8,192 GPUs
/// holds a million waits, and each is under three or four nodes).
struct SubtreeWaits {
    waits: Vec<i64>,
    /// By node index: its run in `waits`.
    runs: Vec<(usize, usize)>,
}

impl SubtreeWaits {
    fn group(tree: &tree_snapshot::TreeSnapshot, submitted: &[&waits::Wait]) -> SubtreeWaits {
        let t = &tree.tree;
        // Each leaf's place in depth-first order, and each node's span of places.
        let mut place = vec![u32::MAX; t.len()];
        let mut span = vec![(0u32, 0u32); t.len()];
        let mut next = 0u32;
        let mut stack = vec![(BudgetId::ROOT, false)];
        while let Some((n, done)) = stack.pop() {
            if done {
                span[n.0 as usize].1 = next;
                continue;
            }
            span[n.0 as usize].0 = next;
            if t.is_leaf(n) {
                place[n.0 as usize] = next;
                next += 1;
                span[n.0 as usize].1 = next;
            } else {
                stack.push((n, true));
                stack.extend(t.children(n).iter().map(|&c| (c, false)));
            }
        }
        // Places by database id (ids are small: a table, not a hash per wait).
        let most = (0..t.len())
            .map(|i| tree.db_id(BudgetId(i as u32)))
            .max()
            .unwrap_or(0);
        let by_db: Vec<u32> = if (0..1 << 20).contains(&most) {
            let mut by_db = vec![u32::MAX; most as usize + 1];
            for i in 0..t.len() {
                by_db[tree.db_id(BudgetId(i as u32)) as usize] = place[i];
            }
            by_db
        } else {
            Vec::new()
        };
        let place_of = |leaf: i64| match usize::try_from(leaf) {
            Ok(i) if !by_db.is_empty() => by_db.get(i).copied().unwrap_or(u32::MAX),
            _ => tree
                .engine_id(leaf)
                .map_or(u32::MAX, |id| place[id.0 as usize]),
        };
        // A counting sort by place.
        let mut places = Vec::with_capacity(submitted.len());
        let mut counts = vec![0usize; next as usize + 1];
        for w in submitted {
            let p = place_of(w.leaf);
            places.push(p);
            if p != u32::MAX {
                counts[p as usize + 1] += 1;
            }
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let starts = counts.clone();
        let mut waits = vec![0i64; counts[next as usize]];
        let mut fill = counts;
        for (w, &p) in submitted.iter().zip(&places) {
            if p != u32::MAX {
                waits[fill[p as usize]] = w.wait_s;
                fill[p as usize] += 1;
            }
        }
        let runs = span
            .iter()
            .map(|&(a, b)| (starts[a as usize], starts[b as usize]))
            .collect();
        SubtreeWaits { waits, runs }
    }

    fn of(&self, node: BudgetId) -> &[i64] {
        let (a, b) = self.runs[node.0 as usize];
        &self.waits[a..b]
    }
}

/// DESIGN §5's headline from each team's `(delivered, owed)` GPU-seconds and the totals.
fn headline(
    teams: &[(f64, f64)],
    tracked: f64,
    capacity: f64,
    charged: f64,
    free: f64,
    debug_p90: Option<i64>,
) -> Headline {
    let owed: f64 = teams.iter().map(|t| t.1).sum();
    let ratio = |t: &(f64, f64)| t.0 / t.1;
    Headline {
        delivered_over_owed: (owed > 0.0)
            .then(|| teams.iter().map(|t| t.0.min(t.1)).sum::<f64>() / owed),
        worst_team: teams
            .iter()
            .map(ratio)
            .min_by(f64::total_cmp)
            .map(|r| r.min(1.0)),
        teams: teams.len(),
        teams_at_95pct: teams.iter().filter(|t| ratio(t) >= 0.95).count(),
        hourly: (owed > 0.0).then(|| tracked / owed),
        occupancy: (capacity > 0.0).then(|| (charged + free) / capacity),
        unallocated_fraction: (charged + free > 0.0).then(|| free / (charged + free)),
        debug_p90_wait_s: debug_p90,
        utilization: None,
        sampled_gpu_h: 0.0,
        capacity_gpu_h: capacity / HOUR as f64,
    }
}

/// The review table's CSV header: the page's columns, shares as fractions, waits in seconds.
pub const CSV_HEADER: &str = "path,funded_share,share_at_start,share_at_end,funded_gpu_h,owed_gpu_h,delivered_gpu_h,delivered_over_owed,unallocated_gpu_h,wait_p50_s,wait_p90_s,utilized_gpu_h,mean_utilization";

/// The review's table as CSV: one line per tree node in the page's order (empty cells where the
/// page shows "—").
pub fn csv(review: &Review) -> String {
    let num = |x: f64| format!("{x:.4}");
    let opt = |v: Option<f64>| v.map(num).unwrap_or_default();
    let secs = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    let mut out = csv::Writer::from_writer(Vec::new());
    let _ = out.write_record(CSV_HEADER.split(','));
    for r in &review.rows {
        let _ = out.write_record([
            super::csv_out::text_cell(&r.path),
            num(r.fraction),
            num(r.share_at_start),
            num(r.share_at_end),
            num(r.funded_gpu_h),
            num(r.owed_gpu_h),
            num(r.delivered_gpu_h),
            opt(r.delivered_over_owed),
            num(r.unallocated_gpu_h),
            secs(r.wait_p50_s),
            secs(r.wait_p90_s),
            if r.utilization.is_some() {
                num(r.utilized_gpu_h)
            } else {
                String::new()
            },
            opt(r.utilization),
        ]);
    }
    super::csv_out::written(out)
}

#[cfg(test)]
mod tests {
    use super::headline;

    #[test]
    fn the_headline_caps_delivered_by_owed_and_the_worst_team_at_one() {
        // Team a got 120 of 100 owed (burst), team b 45 of 50.
        let h = headline(
            &[(120.0, 100.0), (45.0, 50.0)],
            140.0,
            400.0,
            165.0,
            35.0,
            Some(30),
        );
        assert_eq!(h.delivered_over_owed, Some((100.0 + 45.0) / 150.0));
        assert_eq!(h.worst_team, Some(0.9));
        assert_eq!((h.teams, h.teams_at_95pct), (2, 1));
        assert_eq!(h.hourly, Some(140.0 / 150.0));
        assert_eq!(h.occupancy, Some(0.5));
        assert_eq!(h.unallocated_fraction, Some(35.0 / 200.0));
    }
}
