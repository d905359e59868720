//! A month of demo usage history: the simulator replays a generated scenario on the demo tree and
//! cluster, and its run segments become the hourly ledger the charts and reports read. The
//! product ships no third-party data; this history is made here, from a seed.

use super::{org::TREE, repo};
use crate::{budget::org_file::OrgFile, ServerError};
use scheduler::sim::{
    self, parse_cluster, parse_trace,
    scenario::{generate, ScenarioConfig},
    SegmentEnd, SimConfig, SimInput,
};
use scheduler::{BudgetTree, DAY, HOUR};
use sqlx::AnyPool;
use std::collections::BTreeMap;

/// Writes `days` of ledger history ending at the start of the current hour.
pub async fn backfill(pool: &AnyPool, now: i64, days: u32) -> Result<(), ServerError> {
    let org = OrgFile::parse(TREE)?;
    let tree = BudgetTree::from_paths(
        org.shares
            .iter()
            .map(|(path, share)| (path.as_str(), *share)),
    )
    .map_err(|e| ServerError::Config(format!("demo tree: {e}")))?;
    let leaves: Vec<&str> = org
        .shares
        .iter()
        .map(|(p, _)| p.as_str())
        .filter(|p| {
            !org.shares
                .iter()
                .any(|(q, _)| q.starts_with(&format!("{p}/")))
        })
        .collect();
    let scenario = generate(&ScenarioConfig::small(7, days, &leaves));
    // The generator writes the simulator's files; the tree is the demo organisation's own.
    let demo = |e: String| ServerError::Config(format!("demo scenario: {e}"));
    let cluster = parse_cluster(&scenario.cluster_toml).map_err(|e| demo(e.to_string()))?;
    let trace = parse_trace(&scenario.trace_csv, &tree).map_err(|e| demo(e.to_string()))?;
    let input = SimInput::new(tree, cluster, trace).map_err(|e| demo(e.to_string()))?;
    let horizon = i64::from(days) * DAY;
    let output = sim::run(
        &input,
        &SimConfig {
            horizon: Some(horizon),
            ..SimConfig::default()
        },
    );
    let start = now.div_euclid(HOUR) * HOUR - horizon;

    // Per (leaf path, hour): charged, unallocated and demanded GPU-seconds.
    let mut usage: BTreeMap<(String, i64), [f64; 3]> = BTreeMap::new();
    let mut add = |path: &str, column: usize, gpus: f64, from: i64, to: i64| {
        let mut t = from.max(0);
        let to = to.min(horizon);
        while t < to {
            let hour = t.div_euclid(HOUR) * HOUR;
            let edge = (hour + HOUR).min(to);
            usage.entry((path.to_string(), hour)).or_insert([0.0; 3])[column] +=
                gpus * (edge - t) as f64;
            t = edge;
        }
    };
    let mut ended: BTreeMap<u32, i64> = BTreeMap::new();
    for s in &output.segments {
        let path = input.tree.path(s.leaf);
        add(
            path,
            if s.allocated { 0 } else { 1 },
            f64::from(s.gpus.count()),
            s.start,
            s.end,
        );
        if matches!(s.end_kind, SegmentEnd::Completed | SegmentEnd::Killed) {
            ended.insert(s.row, s.end);
        }
    }
    for (i, row) in input.trace.iter().enumerate() {
        if row.min_runtime > 0 {
            let until = ended.get(&(i as u32)).copied().unwrap_or(horizon);
            add(&row.project, 2, f64::from(row.gpus), row.submit, until);
        }
    }
    // Healthy capacity per hour: every host, less its outages.
    let mut capacity: BTreeMap<i64, f64> = BTreeMap::new();
    let total = f64::from(input.cluster.total_gpus());
    let mut hour = 0;
    while hour < horizon {
        capacity.insert(hour, total * HOUR as f64);
        hour += HOUR;
    }
    for o in &input.cluster.outages {
        let gpus = f64::from(input.cluster.nodes[o.node.0 as usize].gpus);
        let mut t = o.from.max(0);
        while t < o.to.min(horizon) {
            let h = t.div_euclid(HOUR) * HOUR;
            let edge = (h + HOUR).min(o.to.min(horizon));
            *capacity.entry(h).or_default() -= gpus * (edge - t) as f64;
            t = edge;
        }
    }

    let ids = repo::live_node_ids(pool).await?;
    let fractions: BTreeMap<String, f64> = input
        .tree
        .leaves()
        .map(|id| {
            (
                input.tree.path(id).to_string(),
                input.tree.version_at(0).fraction(id),
            )
        })
        .collect();
    let mut tx = crate::db::begin_write(pool).await?;
    for (hour, gpu_s) in &capacity {
        repo::insert_capacity(&mut *tx, start + hour, *gpu_s).await?;
    }
    for ((path, hour), [charged, free, demand]) in usage {
        let Some(&leaf) = ids.get(&path) else {
            continue;
        };
        let owed = (fractions.get(&path).copied().unwrap_or(0.0)
            * capacity.get(&hour).copied().unwrap_or(0.0))
        .min(demand);
        repo::insert_usage(&mut *tx, leaf, start + hour, [charged, free, demand, owed]).await?;
    }
    // Roll the month up now, so the first report a visitor opens is instant.
    if let Some(tree) = crate::budget::snapshot::load(&mut tx).await? {
        crate::reports::rollup::ensure(&mut tx, &tree, start, start + horizon, now).await?;
    }
    tx.commit().await?;
    tracing::info!(
        days,
        workloads = input.trace.len(),
        "demo history backfilled"
    );
    Ok(())
}
