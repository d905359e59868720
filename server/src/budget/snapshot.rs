//! The engine's view of the budget tree, rebuilt from the database with its whole share history.

use super::repo;
use crate::ServerError;
use scheduler::{BudgetId, BudgetTree};
use sqlx::AnyConnection;
use std::collections::{BTreeMap, BTreeSet};

/// The engine's tree and the mapping between database ids and engine ids.
#[derive(Debug, Clone)]
pub struct TreeSnapshot {
    pub tree: BudgetTree,
    engine_of: BTreeMap<i64, BudgetId>,
    db_of: Vec<i64>,
}

impl TreeSnapshot {
    pub fn engine_id(&self, budget_node_id: i64) -> Option<BudgetId> {
        self.engine_of.get(&budget_node_id).copied()
    }

    pub fn db_id(&self, id: BudgetId) -> i64 {
        self.db_of[id.0 as usize]
    }
}

/// Loads the tree; `None` while no tree has been imported.
pub async fn load(db: &mut AnyConnection) -> Result<Option<TreeSnapshot>, ServerError> {
    let nodes = repo::budget_nodes(&mut *db).await?;
    let versions = repo::share_versions(&mut *db).await?;
    build(&nodes, &versions)
}

/// The tree as every cluster sees it: the shares in force everywhere, and for each cluster with
/// share overrides its own tree (the same nodes, those shares replaced while an override holds).
#[derive(Debug, Clone)]
pub struct Trees {
    pub base: TreeSnapshot,
    clusters: BTreeMap<i64, TreeSnapshot>,
}

impl Trees {
    /// The tree cluster `cluster_id` decides and accounts with.
    pub fn of(&self, cluster_id: i64) -> &TreeSnapshot {
        self.clusters.get(&cluster_id).unwrap_or(&self.base)
    }
}

/// Loads the tree and every cluster's overrides; `None` while no tree has been imported.
pub async fn load_trees(db: &mut AnyConnection) -> Result<Option<Trees>, ServerError> {
    let nodes = repo::budget_nodes(&mut *db).await?;
    let versions = repo::share_versions(&mut *db).await?;
    let Some(base) = build(&nodes, &versions)? else {
        return Ok(None);
    };
    Ok(Some(with_overrides(db, base).await?))
}

/// `base` (the tree as [`load`] read it) with each cluster's overrides.
pub async fn with_overrides(
    db: &mut AnyConnection,
    base: TreeSnapshot,
) -> Result<Trees, ServerError> {
    let overrides = repo::share_overrides(&mut *db).await?;
    if overrides.is_empty() {
        return Ok(Trees {
            base,
            clusters: BTreeMap::new(),
        });
    }
    let nodes = repo::budget_nodes(&mut *db).await?;
    let versions = repo::share_versions(&mut *db).await?;
    let mut clusters = BTreeMap::new();
    let with_overrides: BTreeSet<i64> = overrides.iter().map(|o| o.cluster_id).collect();
    for cluster in with_overrides {
        let own: Vec<repo::ShareVersionRow> = overrides
            .iter()
            .filter(|o| o.cluster_id == cluster)
            .map(repo::ShareOverrideRow::version)
            .collect();
        if let Some(tree) = build_with(&nodes, &versions, &own)? {
            clusters.insert(cluster, tree);
        }
    }
    Ok(Trees { base, clusters })
}

pub fn build(
    nodes: &[repo::BudgetNodeRow],
    versions: &[repo::ShareVersionRow],
) -> Result<Option<TreeSnapshot>, ServerError> {
    build_with(nodes, versions, &[])
}

/// As [`build`], with `overrides` taking the place of a node's version while they hold.
pub fn build_with(
    nodes: &[repo::BudgetNodeRow],
    versions: &[repo::ShareVersionRow],
    overrides: &[repo::ShareVersionRow],
) -> Result<Option<TreeSnapshot>, ServerError> {
    let non_root: Vec<&repo::BudgetNodeRow> = nodes.iter().filter(|n| !n.path.is_empty()).collect();
    if non_root.is_empty() {
        return Ok(None);
    }
    let mut times: BTreeSet<i64> = versions.iter().map(|v| v.effective_from).collect();
    let first = times.iter().next().copied().unwrap_or(0);
    // An override's start and end change its node's share on this cluster.
    for o in overrides {
        times.extend(std::iter::once(o.effective_from.max(first)).chain(o.effective_to));
    }
    let in_force = |rows: &[repo::ShareVersionRow], node: i64, t: i64| {
        rows.iter()
            .filter(|v| {
                v.budget_node_id == node
                    && v.effective_from <= t
                    && v.effective_to.is_none_or(|to| t < to)
            })
            .map(|v| v.share)
            .next_back()
    };
    let share_at = |node: i64, t: i64| {
        in_force(overrides, node, t)
            .or_else(|| in_force(versions, node, t))
            .unwrap_or(0.0)
    };
    let invalid = |e: scheduler::TreeError| {
        ServerError::Config(format!("the stored budget tree is invalid: {e:?}"))
    };
    let mut tree = BudgetTree::from_paths(
        non_root
            .iter()
            .map(|n| (n.path.as_str(), share_at(n.budget_node_id, first))),
    )
    .map_err(invalid)?;
    let mut engine_of = BTreeMap::new();
    let mut db_of = vec![0; tree.len()];
    for node in nodes {
        let id = if node.path.is_empty() {
            Some(BudgetId::ROOT)
        } else {
            tree.find(&node.path)
        };
        if let Some(id) = id {
            engine_of.insert(node.budget_node_id, id);
            db_of[id.0 as usize] = node.budget_node_id;
        }
    }
    for &t in times.iter().skip(1) {
        let changes: Vec<(BudgetId, f64)> = non_root
            .iter()
            .filter(|n| {
                versions.iter().chain(overrides).any(|v| {
                    v.budget_node_id == n.budget_node_id
                        && (v.effective_from == t || v.effective_to == Some(t))
                })
            })
            .filter_map(|n| {
                engine_of
                    .get(&n.budget_node_id)
                    .map(|&id| (id, share_at(n.budget_node_id, t)))
            })
            .collect();
        tree.add_version(t, changes).map_err(invalid)?;
    }
    Ok(Some(TreeSnapshot {
        tree,
        engine_of,
        db_of,
    }))
}
