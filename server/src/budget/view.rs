//! The budget tree as people see it: shares, effective fractions, owners, usage ratios.

use super::{
    changes::{policy, repo as changes_repo},
    repo::{children_versions, grants, Grant},
};
use crate::{runtime::snapshot, runtime::Runtime, ServerError};
use app::{budget::TreeNodeView, model::CurrentUser};
use sqlx::AnyPool;
use std::collections::BTreeMap;

/// Every node, depth-first in name order, root first, with the standings of the first cluster
/// with nodes.
pub async fn tree_view(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
) -> Result<Vec<TreeNodeView>, ServerError> {
    tree_view_of(pool, runtime, actor, None).await
}

/// As [`tree_view`], with the usage, ratios and utilization of cluster `cluster` (the tree and its
/// shares are the same on every cluster; each keeps its own ledger). A name that is no cluster is
/// refused.
pub async fn tree_view_of(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    cluster: Option<&str>,
) -> Result<Vec<TreeNodeView>, ServerError> {
    let scope = crate::workloads::service::cluster_filter(pool, cluster).await?;
    let now = runtime.now();
    let mut db = pool.acquire().await?;
    // The tree's standings come from the ledger alone: the queue is not read.
    let no_workloads = std::sync::Arc::new(snapshot::Active::default());
    let Some(snaps) = snapshot::load_with(&mut db, &runtime.config(), now, no_workloads).await?
    else {
        return Ok(Vec::new());
    };
    // The standings of one cluster: each keeps its own ledger. Without one named, the cluster
    // the page's menu shows first (the first with registered nodes, connected or not yet).
    let name = match scope {
        Some(cluster) => Some(cluster.name),
        None => crate::clusters::in_use(&mut db)
            .await?
            .into_iter()
            .next()
            .map(|c| c.name),
    };
    let Some(snap) = snaps.named(name.as_deref()) else {
        return Ok(Vec::new());
    };
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // On the connection this view already holds: a second one from the pool while holding the
    // first deadlocks once every connection is held by a request waiting for another.
    for (path, user) in grants(&mut *db, Grant::Owner).await? {
        owners.entry(path).or_default().push(user);
    }
    let versions = children_versions(&mut *db).await?;
    let owner_ids = changes_repo::owners(&mut *db).await?;
    let member_paths = changes_repo::member_paths(&mut *db, actor.id).await?;
    let tree = &snap.tree.tree;
    // GPU-seconds sampled and the same weighted by utilization over the lookback window, each
    // node's subtree's (children are added to their parent, deepest first).
    let mut sampled = vec![(0.0, 0.0); tree.len()];
    let window_start = now - runtime.config().window;
    for (node, s, u) in crate::reports::repo::utilization(
        &mut *db,
        window_start,
        now,
        Some(snap.cluster.cluster_id),
    )
    .await?
    {
        if let Some(id) = snap.tree.engine_id(node) {
            sampled[id.0 as usize] = (s, u);
        }
    }
    let standings = snap.engine.standings(now);
    let shares = tree.version_at(now);
    let tree_shares = super::repo::tree_shares_at(&mut *db, now).await?;
    let mut out = Vec::with_capacity(tree.len());
    let mut order = Vec::with_capacity(tree.len());
    let mut stack = vec![(scheduler::BudgetId::ROOT, 0usize)];
    while let Some((id, depth)) = stack.pop() {
        let path = tree.path(id).to_string();
        let siblings: f64 = tree
            .parent(id)
            .map(|p| tree.children(p).iter().map(|&c| shares.share(c)).sum())
            .unwrap_or(1.0);
        out.push(TreeNodeView {
            name: if id == scheduler::BudgetId::ROOT {
                "cluster".into()
            } else {
                tree.name(id).to_string()
            },
            depth,
            share: shares.share(id),
            tree_share: tree_shares.get(&path).copied(),
            of_parent: if siblings > 0.0 {
                shares.share(id) / siblings
            } else {
                0.0
            },
            fraction: shares.fraction(id),
            leaf: tree.is_leaf(id),
            owners: owners.get(&path).cloned().unwrap_or_default(),
            usage_gpu_h: standings.usage(id) / 3600.0,
            allocated_gpu_h: standings.allocated(id) / 3600.0,
            ratio: Some(standings.ratio(id)).filter(|r| r.is_finite()),
            utilization: None,
            can_propose: !tree.is_leaf(id)
                && policy::may_propose(&owner_ids, &member_paths, actor, &path),
            children_version: versions.get(&path).copied().unwrap_or(0),
            path,
        });
        let mut kids: Vec<_> = tree.children(id).to_vec();
        kids.sort_by(|a, b| tree.name(*b).cmp(tree.name(*a)));
        stack.extend(kids.into_iter().map(|k| (k, depth + 1)));
        order.push(id);
    }
    for &id in order.iter().rev() {
        let (s, u) = sampled[id.0 as usize];
        if let Some(parent) = tree.parent(id) {
            let p = &mut sampled[parent.0 as usize];
            *p = (p.0 + s, p.1 + u);
        }
    }
    for (view, id) in out.iter_mut().zip(&order) {
        let (s, u) = sampled[id.0 as usize];
        view.utilization = (s > 0.0).then(|| u / s);
    }
    Ok(out)
}
