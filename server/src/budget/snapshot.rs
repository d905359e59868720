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

pub fn build(
    nodes: &[repo::BudgetNodeRow],
    versions: &[repo::ShareVersionRow],
) -> Result<Option<TreeSnapshot>, ServerError> {
    let non_root: Vec<&repo::BudgetNodeRow> = nodes.iter().filter(|n| !n.path.is_empty()).collect();
    if non_root.is_empty() {
        return Ok(None);
    }
    let times: BTreeSet<i64> = versions.iter().map(|v| v.effective_from).collect();
    let first = times.iter().next().copied().unwrap_or(0);
    let share_at = |node: i64, t: i64| {
        versions
            .iter()
            .filter(|v| {
                v.budget_node_id == node
                    && v.effective_from <= t
                    && v.effective_to.is_none_or(|to| t < to)
            })
            .map(|v| v.share)
            .next_back()
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
                versions.iter().any(|v| {
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
