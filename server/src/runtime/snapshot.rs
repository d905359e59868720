//! One consistent view of the cluster for the engine, read without taking the write lock.

use super::{config::RuntimeConfig, repo};
use crate::{
    budget::snapshot::{self as tree_snapshot, TreeSnapshot},
    nodes::repo::{self as node_repo, PassNode},
    ServerError,
};
use app::{nodes::NodeHealth, workloads::WorkloadState};
use imbl::OrdMap;
use scheduler::{
    ClusterState, EndedRun, Engine, GpuSet, Health, NodeGpus, NodeId, NodeState, Placement,
    RunningWorkload, WorkloadId, WorkloadSpec, HOUR,
};
use sqlx::{AnyConnection, FromRow};
use std::{collections::BTreeMap, sync::Arc};

/// A workload row as the runtime needs it.
#[derive(Debug, Clone, FromRow)]
pub struct WorkloadRow {
    pub workload_id: i64,
    pub budget_node_id: i64,
    pub name: String,
    pub gpus: i64,
    pub min_runtime_s: i64,
    #[sqlx(try_from = "crate::db::Flag")]
    pub resumable: bool,
    pub priority: i64,
    #[sqlx(try_from = "String")]
    pub state: WorkloadState,
    pub submitted_at: i64,
    pub started_at: Option<i64>,
    pub run_count: i64,
    pub cluster_id: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct OpenRun {
    workload_id: i64,
    node_id: i64,
    gpu_indices: String,
}

/// The queued and running workloads and the GPUs their open runs hold: the part of a snapshot
/// that grows with the queue. The leader keeps one between passes and re-reads only the
/// workloads that changed (see [`super::Runtime`]'s cache); everyone else reads it whole.
///
/// Its maps are persistent (`imbl`): pages keep the snapshot they were served while the leader
/// changes the copy, and a change copies the path to what changed instead of 50,000 entries.
#[derive(Debug, Clone, Default)]
pub struct Active {
    pub rows: OrdMap<i64, Arc<WorkloadRow>>,
    /// What the engine reads of each row, by workload, kept inline: assembling a snapshot walks
    /// every queued workload, and following each row's own allocation was most of a pass's
    /// reading at 50,000 queued (a cache miss per row).
    entries: OrdMap<i64, Entry>,
    /// `(node, GPUs)` of each workload's open runs, by workload.
    pub runs: OrdMap<i64, Vec<(i64, GpuSet)>>,
}

/// The fields of a [`WorkloadRow`] a snapshot is assembled from.
#[derive(Debug, Clone, Copy)]
struct Entry {
    cluster_id: i64,
    budget_node_id: i64,
    gpus: u32,
    priority: i32,
    min_runtime_s: i64,
    submitted_at: i64,
    started_at: Option<i64>,
    resumable: bool,
    running: bool,
}

impl Entry {
    fn of(row: &WorkloadRow) -> Entry {
        Entry {
            cluster_id: row.cluster_id,
            budget_node_id: row.budget_node_id,
            gpus: row.gpus as u32,
            priority: row.priority as i32,
            min_runtime_s: row.min_runtime_s,
            submitted_at: row.submitted_at,
            started_at: row.started_at,
            resumable: row.resumable,
            running: row.state == WorkloadState::Running,
        }
    }
}

impl Active {
    /// Every queued and running workload and every open run.
    pub async fn read_all(db: &mut AnyConnection) -> Result<Active, ServerError> {
        let rows = repo::active_workloads(&mut *db).await?;
        let runs = repo::open_runs(&mut *db).await?;
        let mut active = Active::default();
        active.keep(rows, runs);
        Ok(active)
    }

    /// Reads these workloads again: those no longer queued or running leave.
    pub async fn refresh(
        &mut self,
        db: &mut AnyConnection,
        ids: &[i64],
    ) -> Result<(), ServerError> {
        let rows = repo::workloads_by_id(&mut *db, ids).await?;
        let runs = repo::open_runs_by_workload(&mut *db, ids).await?;
        for id in ids {
            self.rows.remove(id);
            self.entries.remove(id);
            self.runs.remove(id);
        }
        self.keep(rows, runs);
        Ok(())
    }

    /// The copy's side of [`repo::active_summary`].
    pub fn summary(&self) -> repo::ActiveSummary {
        repo::ActiveSummary {
            workloads: self.rows.len() as i64,
            running: self.entries.values().filter(|e| e.running).count() as i64,
            runs: self.rows.values().map(|r| r.run_count).sum(),
            newest: self.rows.get_max().map_or(0, |(id, _)| *id),
        }
    }

    fn keep(&mut self, rows: Vec<WorkloadRow>, runs: Vec<OpenRun>) {
        for row in rows {
            if matches!(row.state, WorkloadState::Queued | WorkloadState::Running) {
                self.entries.insert(row.workload_id, Entry::of(&row));
                self.rows.insert(row.workload_id, Arc::new(row));
            }
        }
        for run in runs {
            if self.rows.contains_key(&run.workload_id) {
                let gpus = GpuSet::of(&parse_indices(&run.gpu_indices));
                self.runs
                    .entry(run.workload_id)
                    .or_default()
                    .push((run.node_id, gpus));
            }
        }
    }
}

/// What a snapshot of one cluster holds besides the queue: the tree, the engine with the
/// cluster's ledger, its nodes. A page on the leader builds on the latest pass's while only
/// workloads changed since (see [`super::Runtime::page_source`]).
#[derive(Clone)]
pub struct Base {
    pub cluster: crate::clusters::Cluster,
    pub engine: Engine,
    pub tree: TreeSnapshot,
    pub nodes: Vec<NodeState>,
    pub node_rows: Vec<PassNode>,
    /// The engine's number for each node id.
    engine_node: BTreeMap<i64, NodeId>,
    /// Debug runs on the cluster that ended within the fast lane's window.
    pub ended_debug: Vec<EndedRun>,
}

/// Every cluster's [`Base`], by cluster id.
pub type Bases = Arc<Vec<Arc<Base>>>;

/// One snapshot per cluster, by cluster id: each decided on its own (DESIGN's one cluster, per
/// cluster), all from one read.
pub struct Snapshots {
    pub clusters: Vec<Snapshot>,
    pub active: Arc<Active>,
}

impl Snapshots {
    pub fn bases(&self) -> Bases {
        Arc::new(self.clusters.iter().map(|s| s.base.clone()).collect())
    }

    /// The snapshot of the cluster with this id.
    pub fn cluster(&self, cluster_id: i64) -> Option<&Snapshot> {
        self.clusters
            .iter()
            .find(|s| s.cluster.cluster_id == cluster_id)
    }

    /// The snapshot of the cluster this queued or running workload is on.
    pub fn of_workload(&self, id: WorkloadId) -> Option<&Snapshot> {
        let row = self.active.rows.get(&(id.0 as i64))?;
        self.cluster(row.cluster_id)
    }

    /// The snapshot of the cluster named `name`, or when `name` is `None` of the first cluster by
    /// name with connected nodes (the first cluster when none has). Pages that offer a menu of
    /// clusters name the one it shows first (`clusters::in_use`), which counts nodes registered
    /// and not connected yet too.
    pub fn named(&self, name: Option<&str>) -> Option<&Snapshot> {
        match name {
            Some(name) => self.clusters.iter().find(|s| s.cluster.name == name),
            None => self
                .clusters
                .iter()
                .filter(|s| !s.nodes.is_empty())
                .min_by(|a, b| a.cluster.name.cmp(&b.cluster.name))
                .or_else(|| self.clusters.first()),
        }
    }

    /// Queued and running workloads in all clusters.
    pub fn active_len(&self) -> usize {
        self.clusters
            .iter()
            .map(|s| s.queued.len() + s.running.len())
            .sum()
    }
}

pub struct Snapshot {
    pub base: Arc<Base>,
    pub running: Vec<RunningWorkload>,
    pub queued: Vec<WorkloadSpec>,
    /// What the queue and the runs looked like (the workloads the engine got, and any it skipped).
    pub active: Arc<Active>,
}

impl std::ops::Deref for Snapshot {
    type Target = Base;

    fn deref(&self) -> &Base {
        &self.base
    }
}

impl Snapshot {
    pub fn state(&self) -> ClusterState<'_> {
        ClusterState {
            nodes: &self.nodes,
            running: &self.running,
            queued: &self.queued,
            ended_debug: &self.ended_debug,
        }
    }

    pub fn node_row(&self, id: NodeId) -> &PassNode {
        &self.node_rows[id.0 as usize]
    }

    pub fn workload(&self, id: WorkloadId) -> Option<&WorkloadRow> {
        self.active.rows.get(&(id.0 as i64)).map(|row| &**row)
    }

    pub fn leaf_path(&self, budget_node_id: i64) -> String {
        self.tree
            .engine_id(budget_node_id)
            .map(|id| self.tree.tree.path(id).to_string())
            .unwrap_or_default()
    }
}

pub fn parse_indices(text: &str) -> Vec<u32> {
    text.split(';')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

pub fn format_indices(gpus: GpuSet) -> String {
    gpus.indices()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

fn health(row: &PassNode) -> Health {
    match row.health {
        NodeHealth::Healthy => Health::Healthy,
        NodeHealth::Cordoned => Health::Cordoned,
        NodeHealth::Unhealthy => Health::Unhealthy,
        NodeHealth::Down => Health::Down,
    }
}

/// Loads everything the engine needs at `now`, per cluster; `None` until a budget tree exists.
pub async fn load(
    db: &mut AnyConnection,
    config: &RuntimeConfig,
    now: i64,
) -> Result<Option<Snapshots>, ServerError> {
    let active = Arc::new(Active::read_all(&mut *db).await?);
    load_with(db, config, now, active).await
}

/// As [`load`], on queued and running workloads already read.
pub async fn load_with(
    db: &mut AnyConnection,
    config: &RuntimeConfig,
    now: i64,
    active: Arc<Active>,
) -> Result<Option<Snapshots>, ServerError> {
    let Some(bases) = load_bases(db, config, now).await? else {
        return Ok(None);
    };
    Ok(Some(assemble_all(&bases, active, now)))
}

/// Everything but the queue, per cluster: the tree, an engine with the cluster's ledger at `now`,
/// its nodes. `None` until a budget tree exists.
pub async fn load_bases(
    db: &mut AnyConnection,
    config: &RuntimeConfig,
    now: i64,
) -> Result<Option<Bases>, ServerError> {
    let Some(shape) = load_shape(db).await? else {
        return Ok(None);
    };
    let closed = ClosedHours::read(db, first_hour(config, now), open_from(now)).await?;
    Ok(Some(bases_on(db, config, now, &shape, &closed).await?))
}

/// What the bases hold besides the ledger, cluster by cluster: the tree with the cluster's own
/// shares, the nodes as the engine numbers them. It changes only when a share, a node's health or
/// the clusters do, so the leader keeps it between passes (see `Runtime::pass`).
pub struct Shape {
    clusters: Vec<ClusterShape>,
}

struct ClusterShape {
    cluster: crate::clusters::Cluster,
    tree: TreeSnapshot,
    nodes: Vec<NodeState>,
    node_rows: Vec<PassNode>,
    engine_node: BTreeMap<i64, NodeId>,
}

/// Reads the [`Shape`]: the tree, the clusters, a thousand nodes. `None` until a budget tree
/// exists.
pub async fn load_shape(db: &mut AnyConnection) -> Result<Option<Shape>, ServerError> {
    let Some(trees) = tree_snapshot::load_trees(db).await? else {
        return Ok(None);
    };
    let clusters = crate::clusters::repo::all(&mut *db).await?;
    // Nodes without GPUs (registered, never connected) cannot hold work; the engine needs ≥ 1.
    let all_nodes = node_repo::pass_nodes(&mut *db).await?;
    let clusters = clusters
        .into_iter()
        .map(|cluster| {
            let node_rows: Vec<PassNode> = all_nodes
                .iter()
                .filter(|n| n.cluster_id == cluster.cluster_id)
                .cloned()
                .collect();
            let nodes = node_rows
                .iter()
                .map(|n| NodeState {
                    gpus: n.gpu_count as u32,
                    health: health(n),
                })
                .collect();
            let engine_node = node_rows
                .iter()
                .enumerate()
                .map(|(i, n)| (n.node_id, NodeId(i as u32)))
                .collect();
            // The tree's shares, with the cluster's own where it overrides any.
            let tree = trees.of(cluster.cluster_id).clone();
            ClusterShape {
                cluster,
                tree,
                nodes,
                node_rows,
                engine_node,
            }
        })
        .collect();
    Ok(Some(Shape { clusters }))
}

/// The first hour of the ledger a decision at `now` reads: the window's, and the one before.
pub fn first_hour(config: &RuntimeConfig, now: i64) -> i64 {
    (now - config.window).div_euclid(HOUR) * HOUR - HOUR
}

/// The first hour whose charges a run may still add to at `now`: the hour before `now`'s (a run
/// closed at the turn of the hour charges what it ran since the last pass). Earlier hours of the
/// ledger are final.
pub fn open_from(now: i64) -> i64 {
    now.div_euclid(HOUR) * HOUR - HOUR
}

/// The charges `(cluster, leaf, hour, GPU-seconds)` of the ledger's final hours,
/// `[first_hour, until)`: at a week of history, 25,000 cells that the leader keeps between
/// passes (see `Runtime::kept_closed`), reading only the open hours at each.
#[derive(Debug, Clone)]
pub struct ClosedHours {
    pub first_hour: i64,
    pub until: i64,
    cells: Vec<(i64, i64, i64, f64)>,
}

impl ClosedHours {
    pub async fn read(
        db: &mut AnyConnection,
        first_hour: i64,
        until: i64,
    ) -> Result<ClosedHours, ServerError> {
        Ok(ClosedHours {
            first_hour,
            until,
            cells: repo::charged_between(&mut *db, first_hour, until).await?,
        })
    }

    /// Reads the hours that closed since, up to `until`.
    pub async fn extend(&mut self, db: &mut AnyConnection, until: i64) -> Result<(), ServerError> {
        if until > self.until {
            let cells = repo::charged_between(&mut *db, self.until, until).await?;
            self.cells.extend(cells);
            self.until = until;
        }
        Ok(())
    }
}

/// The bases at `now` on `shape`: each cluster's ledger over the window (the final hours from
/// `closed`, the others read now) and the debug runs of the fast lane's window.
pub async fn bases_on(
    db: &mut AnyConnection,
    config: &RuntimeConfig,
    now: i64,
    shape: &Shape,
    closed: &ClosedHours,
) -> Result<Bases, ServerError> {
    let first_hour = closed.first_hour;
    let open = repo::charged_since(&mut *db, closed.until).await?;
    let capacity = repo::capacity_since(&mut *db, first_hour).await?;
    let ended_debug = repo::debug_runs_ended_since(&mut *db, now - config.fast_lane_window).await?;
    let mut bases = Vec::with_capacity(shape.clusters.len());
    for c in &shape.clusters {
        let mut engine = Engine::new(c.tree.tree.clone(), config.engine_config());
        let ledger = Ledger {
            cluster: c.cluster.cluster_id,
            usage: [&closed.cells[..], &open[..]],
            capacity: &capacity,
            first_hour,
        };
        ledger.feed(&mut engine, &c.tree, &c.nodes, now);
        bases.push(Arc::new(Base {
            cluster: c.cluster.clone(),
            engine,
            tree: c.tree.clone(),
            nodes: c.nodes.clone(),
            node_rows: c.node_rows.clone(),
            engine_node: c.engine_node.clone(),
            ended_debug: lane_runs(&ended_debug, c.cluster.cluster_id),
        }));
    }
    Ok(Arc::new(bases))
}

/// The bases of a later round of a pass at the same `now` as the round that read `bases`: the
/// tree, the nodes and the ledger as they were (the rounds' own writes change none of them: the
/// ledger was booked up to `now` before the first round), the debug runs that ended within the
/// fast lane's window read again (the round before may have stopped some). Reading the tree and
/// a thousand nodes took most of a round's reading.
pub async fn lane_again(
    db: &mut AnyConnection,
    config: &RuntimeConfig,
    now: i64,
    bases: &Bases,
) -> Result<Bases, ServerError> {
    let ended_debug = repo::debug_runs_ended_since(&mut *db, now - config.fast_lane_window).await?;
    Ok(Arc::new(
        bases
            .iter()
            .map(|base| {
                let lane_runs = lane_runs(&ended_debug, base.cluster.cluster_id);
                if lane_runs == base.ended_debug {
                    base.clone()
                } else {
                    Arc::new(Base {
                        ended_debug: lane_runs,
                        ..(**base).clone()
                    })
                }
            })
            .collect(),
    ))
}

/// The debug runs of `ended_debug` (`(cluster, run)`) that ran on this cluster.
fn lane_runs(ended_debug: &[(i64, EndedRun)], cluster_id: i64) -> Vec<EndedRun> {
    ended_debug
        .iter()
        .filter(|(c, _)| *c == cluster_id)
        .map(|&(_, run)| run)
        .collect()
}

/// The snapshots of `active` on every cluster's base.
pub fn assemble_all(bases: &Bases, active: Arc<Active>, now: i64) -> Snapshots {
    Snapshots {
        clusters: bases
            .iter()
            .map(|base| assemble(base.clone(), active.clone(), now))
            .collect(),
        active,
    }
}

/// The snapshot of `active` on `base`: the cluster's queued and running workloads as the engine
/// takes them.
pub fn assemble(base: Arc<Base>, active: Arc<Active>, now: i64) -> Snapshot {
    let tree = &base.tree;
    let mut running = Vec::new();
    let mut queued = Vec::new();
    for (&workload_id, row) in &active.entries {
        if row.cluster_id != base.cluster.cluster_id {
            continue;
        }
        let Some(leaf) = tree
            .engine_id(row.budget_node_id)
            .filter(|&id| tree.tree.is_leaf(id))
        else {
            tracing::warn!(
                workload = workload_id,
                "workload's leaf is not in the tree; skipped"
            );
            continue;
        };
        let spec = WorkloadSpec {
            id: WorkloadId(workload_id as u64),
            leaf,
            gpus: row.gpus,
            min_runtime: row.min_runtime_s,
            resumable: row.resumable,
            priority: row.priority,
            submitted_at: row.submitted_at,
            time_limit: None,
        };
        if !row.running {
            queued.push(spec);
            continue;
        }
        let mut parts: Vec<NodeGpus> = active
            .runs
            .get(&workload_id)
            .into_iter()
            .flatten()
            .filter_map(|&(node, gpus)| {
                base.engine_node
                    .get(&node)
                    .map(|&node| NodeGpus { node, gpus })
            })
            .collect();
        if !parts.is_empty() {
            parts.sort();
            running.push(RunningWorkload {
                spec,
                started_at: row.started_at.unwrap_or(now),
                placement: Placement { parts },
                baseline_protected: false,
            });
        } else {
            tracing::warn!(
                workload = workload_id,
                "running workload without an open run; skipped"
            );
        }
    }
    Snapshot {
        base,
        running,
        queued,
        active,
    }
}

/// The window of the hourly ledger read once for every cluster.
struct Ledger<'a> {
    cluster: i64,
    /// `(cluster, leaf, hour, charged)`: the final hours, then the open ones.
    usage: [&'a [(i64, i64, i64, f64)]; 2],
    /// Healthy GPU-seconds by `(cluster, hour)`.
    capacity: &'a BTreeMap<(i64, i64), f64>,
    first_hour: i64,
}

impl Ledger<'_> {
    /// Feeds the engine's ledger from the cluster's hourly buckets of the window, and its capacity
    /// hour by hour (hours the server did not record count as the current healthy capacity).
    fn feed(&self, engine: &mut Engine, tree: &TreeSnapshot, nodes: &[NodeState], now: i64) {
        let current: u32 = nodes
            .iter()
            .filter(|n| n.health == Health::Healthy)
            .map(|n| n.gpus)
            .sum();
        let ledger = engine.ledger_mut();
        let mut hour = self.first_hour;
        while hour <= now {
            let gpus = match self.capacity.get(&(self.cluster, hour)) {
                Some(&gpu_s) if hour + HOUR <= now => (gpu_s / HOUR as f64).round() as u32,
                _ => current,
            };
            ledger.set_capacity(hour, gpus);
            hour += HOUR;
        }
        for &(cluster, budget_node_id, hour, gpu_s) in self.usage.iter().copied().flatten() {
            if cluster != self.cluster {
                continue;
            }
            if let Some(leaf) = tree.engine_id(budget_node_id) {
                let to = (hour + HOUR).min(now);
                if to > hour {
                    ledger.charge(leaf, hour, to, gpu_s);
                }
            }
        }
    }
}
