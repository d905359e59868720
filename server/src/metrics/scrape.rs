//! How things stand, read from the database at each scrape: GPUs by state, the queue by leaf and
//! kind, each tree node's usage ratio and this quarter's delivered over owed, heartbeat ages.

use crate::{nodes::repo as node_repo, reports::review, AppState, ServerError};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};
use std::{
    collections::{BTreeMap, HashMap},
    sync::atomic::AtomicU64,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuLabels {
    cluster: String,
    /// `allocated` or `unallocated` (held by a run of that kind), `idle` (free on a healthy
    /// node), or the node's state (`cordoned`, `unhealthy`, `down`) for GPUs no run holds.
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    cluster: String,
    leaf: String,
    /// `debug` (a minimum runtime of at most 15 min on at most 8 GPUs), `allocated` or `free`.
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    cluster: String,
    path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuOfNodeLabels {
    cluster: String,
    node: String,
    gpu: u32,
}

type Ratio = Family<PathLabels, Gauge<f64, AtomicU64>>;

/// The gauges as they stand now, in the text format (no `# EOF`).
pub async fn encode(state: &AppState, out: &mut String) -> Result<(), ServerError> {
    let now = state.runtime.now();
    let mut registry = Registry::default();

    let nodes = node_repo::list_nodes(&state.pool).await?;
    // Every gauge is per cluster: the clusters in use (`default` alone while none has nodes).
    let clusters: Vec<String> = {
        let mut db = state.pool.acquire().await?;
        crate::clusters::in_use(&mut db)
            .await?
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    let cluster_of: HashMap<i64, &str> = nodes
        .iter()
        .map(|n| (n.node_id, n.cluster.as_str()))
        .collect();
    let held: Vec<(i64, i64, i64)> = sqlx::query_as(
        "select node_id, allocated, cast(coalesce(sum(gpus), 0) as bigint) from workload_run
         where ended_at is null group by node_id, allocated",
    )
    .fetch_all(&state.pool)
    .await?;
    let mut held_on: HashMap<i64, i64> = HashMap::new();
    let mut by_state: BTreeMap<(String, String), i64> = clusters
        .iter()
        .flat_map(|c| {
            ["allocated", "unallocated", "idle"]
                .iter()
                .map(|s| ((c.clone(), s.to_string()), 0))
        })
        .collect();
    for (node, allocated, gpus) in held {
        *held_on.entry(node).or_default() += gpus;
        let kind = if allocated != 0 {
            "allocated"
        } else {
            "unallocated"
        };
        let cluster = cluster_of.get(&node).copied().unwrap_or_default();
        *by_state.entry((cluster.into(), kind.into())).or_default() += gpus;
    }
    let heartbeat_age = Family::<NodeLabels, Gauge>::default();
    let sampled: HashMap<i64, String> =
        sqlx::query_as("select node_id, gpu_utilization from node where gpu_utilization <> ''")
            .fetch_all(&state.pool)
            .await?
            .into_iter()
            .collect();
    let utilization = Family::<GpuOfNodeLabels, Gauge<f64, AtomicU64>>::default();
    for node in &nodes {
        // The latest sample of each GPU, while its node is heard from.
        if let (Some(text), false) = (
            sampled.get(&node.node_id),
            node.health() == app::nodes::NodeHealth::Down,
        ) {
            for (gpu, percent) in crate::agent::utilization::parse_latest(text) {
                utilization
                    .get_or_create(&GpuOfNodeLabels {
                        cluster: node.cluster.clone(),
                        node: node.name.clone(),
                        gpu,
                    })
                    .set(percent / 100.0);
            }
        }
        let free = (node.gpu_count - held_on.get(&node.node_id).copied().unwrap_or(0)).max(0);
        let health = node.health();
        let state = if health == app::nodes::NodeHealth::Healthy {
            "idle"
        } else {
            health.as_str()
        };
        *by_state
            .entry((node.cluster.clone(), state.into()))
            .or_default() += free;
        if let Some(at) = node.last_heartbeat_at {
            heartbeat_age
                .get_or_create(&NodeLabels {
                    node: node.name.clone(),
                })
                .set(now - at);
        }
    }
    let gpus = Family::<GpuLabels, Gauge>::default();
    for ((cluster, state), count) in by_state {
        gpus.get_or_create(&GpuLabels { cluster, state }).set(count);
    }
    registry.register(
        "hourglass_gpus",
        "GPUs of registered nodes by what holds them or why nothing can",
        gpus,
    );
    registry.register(
        "hourglass_gpu_utilization",
        "Each GPU's latest utilization sample (0-1), as its agent's nvidia-smi reported it",
        utilization,
    );
    registry.register(
        "hourglass_node_heartbeat_age_seconds",
        "Seconds since each node's agent last spoke",
        heartbeat_age,
    );

    let queued: Vec<(String, String, String, i64)> = sqlx::query_as(
        "select c.name, b.path,
                case when w.min_runtime_s = 0 then 'free'
                     when w.min_runtime_s <= 900 and w.gpus <= 8 then 'debug'
                     else 'allocated' end as kind,
                count(*)
         from workload w join budget_node b on b.budget_node_id = w.budget_node_id
              join cluster c on c.cluster_id = w.cluster_id
         where w.state = 'queued'
         group by c.name, b.path, kind",
    )
    .fetch_all(&state.pool)
    .await?;
    let queue = Family::<QueueLabels, Gauge>::default();
    for (cluster, leaf, kind, count) in queued {
        queue
            .get_or_create(&QueueLabels {
                cluster,
                leaf,
                kind,
            })
            .set(count);
    }
    registry.register(
        "hourglass_queue_workloads",
        "Workloads waiting, by leaf and kind",
        queue,
    );

    // Standings as the Budget tree page shows them, and the quarter so far as the review does.
    let usage_ratio = usage_ratios(state, &clusters, now).await?;
    registry.register(
        "hourglass_usage_ratio",
        "Each tree node's usage over its share (1 is exactly its share; DESIGN §4.3)",
        usage_ratio,
    );
    let fiscal = state.runtime.config().fiscal();
    let (year, quarter) = fiscal.quarter_of(now);
    let delivered = Ratio::default();
    if let Some((from, to)) = fiscal.quarter(year, quarter) {
        for name in &clusters {
            let Some(cluster) =
                crate::workloads::service::cluster_filter(&state.pool, Some(name)).await?
            else {
                continue;
            };
            let scope = review::Scope::One(&cluster);
            let r = review::review_of(&state.pool, from, to, String::new(), now, scope).await?;
            for row in r.rows {
                if let Some(ratio) = row.delivered_over_owed {
                    delivered
                        .get_or_create(&PathLabels {
                            cluster: cluster.name.clone(),
                            path: row.path,
                        })
                        .set(ratio);
                }
            }
        }
    }
    registry.register(
        "hourglass_delivered_over_owed",
        "This quarter so far: GPU-hours delivered over GPU-hours owed, per tree node",
        delivered,
    );
    prometheus_client::encoding::text::encode_registry(out, &registry)
        .map_err(|_| ServerError::Config("metrics could not be written".into()))
}

/// Each tree node's usage ratio on each cluster in `clusters`, as the Budget tree page computes
/// it: one read of the tree, nodes and ledger for all of them (the queue is not read).
async fn usage_ratios(
    state: &AppState,
    clusters: &[String],
    now: i64,
) -> Result<Ratio, ServerError> {
    let ratios = Ratio::default();
    let mut db = state.pool.acquire().await?;
    let no_workloads = std::sync::Arc::new(crate::runtime::snapshot::Active::default());
    let config = state.runtime.config();
    let Some(snaps) =
        crate::runtime::snapshot::load_with(&mut db, &config, now, no_workloads).await?
    else {
        return Ok(ratios);
    };
    for cluster in clusters {
        let Some(snap) = snaps.named(Some(cluster)) else {
            continue;
        };
        let tree = &snap.tree.tree;
        let standings = snap.engine.standings(now);
        // From the root down, as the page walks it: nodes no longer in the tree are not reached.
        let mut stack = tree.children(scheduler::BudgetId::ROOT).to_vec();
        while let Some(id) = stack.pop() {
            stack.extend_from_slice(tree.children(id));
            let ratio = standings.ratio(id);
            if ratio.is_finite() {
                ratios
                    .get_or_create(&PathLabels {
                        cluster: cluster.clone(),
                        path: tree.path(id).to_string(),
                    })
                    .set(ratio);
            }
        }
    }
    Ok(ratios)
}
