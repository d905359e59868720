//! A month of demo usage history: the simulator replays a generated scenario on the demo tree and
//! cluster, and its run segments become the hourly ledger the charts and reports read, and the
//! workloads that ended within the month become workload rows with their runs, so the impact
//! preview, the waits in the reports and the workload pages read the same history as the charts.
//! The product ships no third-party data; this history is made here, from a seed.

use super::{org::TREE, repo};
use crate::{
    budget::org_file::OrgFile,
    bulk_insert::{insert, Value, RUN_COLUMNS, WORKLOAD_COLUMNS},
    runtime::snapshot::format_indices,
    ServerError,
};
use scheduler::sim::{
    self, parse_cluster, parse_trace,
    scenario::{generate, ScenarioConfig},
    SegmentEnd, SimConfig, SimInput,
};
use scheduler::{BudgetTree, DAY, HOUR};
use sqlx::AnyPool;
use std::collections::BTreeMap;

/// Writes `days` of ledger history ending at the start of the current hour, for each demo cluster:
/// a scenario of its own on its own nodes (a team's work on one cluster is not seen on the other).
pub async fn backfill(pool: &AnyPool, now: i64, days: u32) -> Result<(), ServerError> {
    for (i, cluster) in super::CLUSTERS.iter().enumerate() {
        let nodes: Vec<(&str, u32)> = super::NODES
            .iter()
            .filter(|(_, _, c)| c == cluster)
            .map(|&(name, gpus, _)| (name, gpus))
            .collect();
        backfill_cluster(pool, now, days, cluster, &nodes, 7 + i as u64).await?;
    }
    // Roll the month up now, every cluster's ledger written, so the first report a visitor
    // opens is instant.
    let horizon = i64::from(days) * DAY;
    let start = now.div_euclid(HOUR) * HOUR - horizon;
    let mut tx = crate::db::begin_write(pool).await?;
    if let Some(tree) = crate::budget::snapshot::load(&mut tx).await? {
        crate::reports::rollup::ensure(&mut tx, &tree, start, start + horizon, now).await?;
    }
    // And the waits of those days, or the first visitors would all roll them up at once.
    crate::reports::waits::ensure(&mut tx, start, now).await?;
    tx.commit().await?;
    Ok(())
}

/// One cluster's history: `nodes` are its hosts in order, `seed` its scenario's.
async fn backfill_cluster(
    pool: &AnyPool,
    now: i64,
    days: u32,
    cluster_name: &str,
    nodes: &[(&str, u32)],
    seed: u64,
) -> Result<(), ServerError> {
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
    let scenario = generate(&ScenarioConfig {
        hosts: nodes.iter().map(|&(_, gpus)| gpus).collect(),
        ..ScenarioConfig::small(seed, days, &leaves)
    });
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

    // Per (leaf path, hour): charged, unallocated, demanded, sampled and utilized GPU-seconds
    // (the simulated nodes' utilization, as their agents would have sampled it).
    let mut usage: BTreeMap<(String, i64), [f64; 5]> = BTreeMap::new();
    let mut add = |path: &str, column: usize, gpus: f64, from: i64, to: i64| {
        let mut t = from.max(0);
        let to = to.min(horizon);
        while t < to {
            let hour = t.div_euclid(HOUR) * HOUR;
            let edge = (hour + HOUR).min(to);
            usage.entry((path.to_string(), hour)).or_insert([0.0; 5])[column] +=
                gpus * (edge - t) as f64;
            t = edge;
        }
    };
    let mut ended: BTreeMap<u32, i64> = BTreeMap::new();
    for s in &output.segments {
        let path = input.tree.path(s.leaf);
        let gpus = f64::from(s.gpus.count());
        add(path, if s.allocated { 0 } else { 1 }, gpus, s.start, s.end);
        let level = crate::agent::sampling::simulated_level(i64::from(s.row)) / 100.0;
        add(path, 3, gpus, s.start, s.end);
        add(path, 4, gpus * level, s.start, s.end);
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
    let cluster = crate::clusters::ensure(&mut tx, cluster_name, now).await?;
    let cluster_id = cluster.cluster_id;
    for (hour, gpu_s) in &capacity {
        repo::insert_capacity(&mut *tx, cluster_id, start + hour, *gpu_s).await?;
    }
    for ((path, hour), [charged, free, demand, sampled, utilized]) in usage {
        let Some(&leaf) = ids.get(&path) else {
            continue;
        };
        let owed = (fractions.get(&path).copied().unwrap_or(0.0)
            * capacity.get(&hour).copied().unwrap_or(0.0))
        .min(demand);
        repo::insert_usage(
            &mut *tx,
            leaf,
            cluster_id,
            start + hour,
            [charged, free, demand, owed, sampled, utilized],
        )
        .await?;
    }
    tx.commit().await?;
    let place = Place {
        cluster: &cluster,
        nodes,
    };
    workloads(pool, &input, &output.segments, &org, &place, start, now).await?;
    tracing::info!(
        days,
        cluster = cluster_name,
        workloads = input.trace.len(),
        "demo history backfilled"
    );
    Ok(())
}

/// Where a scenario ran: a cluster and its hosts in order.
struct Place<'a> {
    cluster: &'a crate::clusters::Cluster,
    nodes: &'a [(&'a str, u32)],
}

/// The scenario's workloads that ended within the month, as ended workloads of the demo's people
/// on the demo's nodes (the scenario's hosts in order: same sizes), each with its runs. Those still
/// waiting or running at the month's end are left out: the live scheduler would pick them up.
async fn workloads(
    pool: &AnyPool,
    input: &SimInput,
    segments: &[sim::Segment],
    org: &OrgFile,
    place: &Place<'_>,
    start: i64,
    now: i64,
) -> Result<(), ServerError> {
    let mut nodes = Vec::new();
    for (name, _) in place.nodes {
        let node = super::demo_node(pool, name, &place.cluster.name, now).await?;
        nodes.push(node.node_id);
    }
    let users: BTreeMap<String, i64> = repo::user_ids(pool).await?;
    let leaves = repo::live_node_ids(pool).await?;
    let mut runs: BTreeMap<u32, Vec<&sim::Segment>> = BTreeMap::new();
    for s in segments {
        runs.entry(s.row).or_default().push(s);
    }
    let mut rows = Vec::new();
    let mut run_rows = Vec::new();
    for (row, segs) in &runs {
        let last = segs
            .iter()
            .max_by_key(|s| s.end)
            .expect("a row has segments");
        let state = match last.end_kind {
            SegmentEnd::Completed => "succeeded",
            SegmentEnd::Killed => "preempted",
            _ => continue,
        };
        let w = &input.trace[*row as usize];
        let members = org
            .members
            .get(&w.project)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let (Some(user), Some(&leaf)) = (
            members
                .get(*row as usize % members.len().max(1))
                .and_then(|u| users.get(u)),
            leaves.get(&w.project),
        ) else {
            continue;
        };
        let first = segs.iter().map(|s| s.start).min().unwrap_or(last.start);
        // A run on several hosts is one segment per host: count each run once.
        let mut spans: Vec<(i64, i64)> = segs.iter().map(|s| (s.start, s.end)).collect();
        spans.sort_unstable();
        spans.dedup();
        let ran: i64 = spans.iter().map(|(from, to)| to - from).sum();
        rows.push((*row, *user, leaf, w, state, first, last, ran, spans.len()));
        for s in segs {
            let node = nodes.get(s.node.0 as usize).copied().unwrap_or(nodes[0]);
            let kind = match s.end_kind {
                SegmentEnd::Completed => "completed",
                SegmentEnd::Drained => "drained",
                SegmentEnd::Killed => "killed",
                _ => "preempted",
            };
            run_rows.push((*row, node, s, kind));
        }
    }
    let mut db = pool.acquire().await?;
    // Ids after any existing workload, so the runs can name them.
    let base: i64 = sqlx::query_scalar("select coalesce(max(workload_id), 0) from workload")
        .fetch_one(&mut *db)
        .await?;
    let id = |row: u32| base + 1 + i64::from(row);
    insert(
        &mut db,
        "workload",
        WORKLOAD_COLUMNS,
        rows.iter()
            .map(|(row, user, leaf, w, state, first, last, ran, count)| {
                let succeeded = *state == "succeeded";
                vec![
                    Value::Int(id(*row)),
                    Value::Int(*user),
                    Value::Int(*leaf),
                    Value::Text(format!(
                        "{}-{}",
                        w.project.rsplit('/').next().unwrap_or("job"),
                        w.id
                    )),
                    Value::Text(format!("sleep {}", w.duration)),
                    Value::Int(i64::from(w.gpus)),
                    Value::Int(w.min_runtime),
                    Value::Int(i64::from(w.resumable)),
                    Value::Int(i64::from(w.priority)),
                    Value::Text(state.to_string()),
                    Value::Int(start + w.submit),
                    Value::Int(start + w.submit),
                    Value::Int(start + first),
                    // Ended: no run in progress, as the runtime leaves a workload that ends.
                    Value::MaybeInt(None),
                    Value::MaybeInt(None),
                    Value::Int(start + last.end),
                    Value::MaybeInt(succeeded.then_some(0)),
                    Value::Int(*count as i64),
                    Value::Int(if succeeded { w.duration } else { *ran }),
                    Value::Text(String::new()),
                    Value::Int(place.cluster.cluster_id),
                ]
            }),
    )
    .await?;
    insert(
        &mut db,
        "workload_run",
        RUN_COLUMNS,
        run_rows.iter().map(|(row, node, s, kind)| {
            vec![
                Value::Int(id(*row)),
                Value::Int(*node),
                Value::Text(format_indices(s.gpus)),
                Value::Int(i64::from(s.gpus.count())),
                Value::Int(i64::from(s.allocated)),
                Value::Int(start + s.start),
                Value::MaybeInt(s.protected_until.map(|t| start + t)),
                Value::Int(start + s.end),
                Value::Int(start + s.end),
                Value::Text(kind.to_string()),
                Value::Int(start + s.end),
            ]
        }),
    )
    .await?;
    crate::bulk_insert::resync_ids(
        &mut db,
        &[
            ("workload", "workload_id"),
            ("workload_run", "workload_run_id"),
        ],
    )
    .await?;
    Ok(())
}
