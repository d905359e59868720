//! The budget tree: who is funded for what fraction of the cluster's time, and since when.
//!
//! The shape (names and parents) is fixed when the tree is built; shares are versioned. Each
//! [`ShareVersion`] is in force from its `effective_from` until the next one, so the ledger can
//! integrate allocations over a window exactly as they were. Removing a node from the org is a
//! version that sets its share to 0: history that mentions it stays valid.

use std::collections::BTreeMap;
use std::fmt;

use crate::ids::{BudgetId, Time};

/// Why a tree (or a share change) was rejected. Each names what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeError {
    /// A share is negative, NaN or infinite.
    InvalidShare { path: String, share: f64 },
    /// An inner path is used by a deeper path but has no share of its own.
    MissingShare { path: String },
    /// A name is empty or contains `/`.
    InvalidName { name: String },
    /// Two nodes with the same name under the same parent.
    DuplicateName { path: String },
    /// Two link records use the same key.
    DuplicateKey { key: u64 },
    /// A link record names a parent key that no record has.
    UnknownParent { key: u64, parent: u64 },
    /// Following parents from this key comes back to it.
    Cycle { key: u64 },
    /// No path with that name exists.
    UnknownNode { path: String },
    /// The path exists but has children, so workloads cannot be charged to it.
    NotALeaf { path: String },
    /// The id is outside this tree.
    UnknownId { id: BudgetId },
    /// The root's share cannot be set: it is the whole cluster.
    RootShare,
    /// The tree has no leaf to charge anything to.
    Empty,
    /// A share version must start after the latest one.
    VersionOutOfOrder { effective_from: Time, latest: Time },
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::InvalidShare { path, share } => {
                write!(
                    f,
                    "share of `{path}` must be a finite number ≥ 0, got {share}"
                )
            }
            TreeError::MissingShare { path } => write!(f, "`{path}` has children but no share"),
            TreeError::InvalidName { name } => {
                write!(f, "`{name}` is not a valid name (empty or contains `/`)")
            }
            TreeError::DuplicateName { path } => write!(f, "`{path}` appears twice"),
            TreeError::DuplicateKey { key } => write!(f, "node key {key} appears twice"),
            TreeError::UnknownParent { key, parent } => {
                write!(f, "node {key} names parent {parent}, which does not exist")
            }
            TreeError::Cycle { key } => write!(f, "node {key} is its own ancestor"),
            TreeError::UnknownNode { path } => write!(f, "no tree node `{path}`"),
            TreeError::NotALeaf { path } => {
                write!(f, "`{path}` has children; workloads are charged to leaves")
            }
            TreeError::UnknownId { id } => write!(f, "no tree node with id {}", id.0),
            TreeError::RootShare => write!(f, "the root is the whole cluster and has no share"),
            TreeError::Empty => write!(f, "the tree has no leaves"),
            TreeError::VersionOutOfOrder {
                effective_from,
                latest,
            } => write!(
                f,
                "a share version effective at {effective_from} is not after the latest ({latest})"
            ),
        }
    }
}

impl std::error::Error for TreeError {}

/// One set of shares and the fractions they imply, in force from `effective_from`.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareVersion {
    /// When these shares took effect. The first version also covers all time before it.
    pub effective_from: Time,
    shares: Vec<f64>,
    fractions: Vec<f64>,
}

impl ShareVersion {
    /// A node's weight among its siblings.
    pub fn share(&self, id: BudgetId) -> f64 {
        self.shares[id.index()]
    }

    /// The node's fraction of the whole cluster: the product of normalised shares along its path.
    pub fn fraction(&self, id: BudgetId) -> f64 {
        self.fractions[id.index()]
    }

    pub(crate) fn fractions(&self) -> &[f64] {
        &self.fractions
    }
}

/// A record for [`BudgetTree::from_links`], shaped like a database row.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLink {
    pub key: u64,
    /// `None` for a child of the root.
    pub parent: Option<u64>,
    pub name: String,
    pub share: f64,
}

/// The budget tree. Nodes live in an arena in pre-order of names; `BudgetId(0)` is the root.
#[derive(Clone, Debug)]
pub struct BudgetTree {
    names: Vec<String>,
    paths: Vec<String>,
    parent: Vec<Option<BudgetId>>,
    children: Vec<Vec<BudgetId>>,
    by_path: BTreeMap<String, BudgetId>,
    versions: Vec<ShareVersion>,
}

impl BudgetTree {
    /// Builds a tree from `path → share` pairs (`"ai/olmo/pretrain"`), the simulator's `[shares]`
    /// table. Every inner path must have its own share, so no fraction is silently invented.
    pub fn from_paths<I, S>(shares: I) -> Result<BudgetTree, TreeError>
    where
        I: IntoIterator<Item = (S, f64)>,
        S: AsRef<str>,
    {
        let mut given: BTreeMap<String, f64> = BTreeMap::new();
        for (path, share) in shares {
            let path = path.as_ref().trim_matches('/').to_string();
            for name in path.split('/') {
                if name.is_empty() {
                    return Err(TreeError::InvalidName { name: path.clone() });
                }
            }
            check_share(&path, share)?;
            if given.insert(path.clone(), share).is_some() {
                return Err(TreeError::DuplicateName { path });
            }
        }
        for path in given.keys() {
            let mut prefix = path.as_str();
            while let Some(cut) = prefix.rfind('/') {
                prefix = &prefix[..cut];
                if !given.contains_key(prefix) {
                    return Err(TreeError::MissingShare {
                        path: prefix.to_string(),
                    });
                }
            }
        }
        // BTreeMap order puts "a" before "a/b" before "a0": a parent always precedes its children.
        let mut builder = Builder::default();
        for (path, share) in &given {
            let (parent, name) = match path.rfind('/') {
                Some(cut) => (builder.by_path[&path[..cut]], &path[cut + 1..]),
                None => (BudgetId::ROOT, path.as_str()),
            };
            builder.add(parent, name, *share)?;
        }
        builder.finish()
    }

    /// Builds a tree from `(key, parent key, name, share)` records, as stored in a database.
    /// Rejects duplicate keys, unknown parents and cycles.
    pub fn from_links(links: &[NodeLink]) -> Result<BudgetTree, TreeError> {
        let mut by_key: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, link) in links.iter().enumerate() {
            if by_key.insert(link.key, i).is_some() {
                return Err(TreeError::DuplicateKey { key: link.key });
            }
            check_name(&link.name)?;
            check_share(&link.name, link.share)?;
        }
        let mut depth: Vec<Option<usize>> = vec![None; links.len()];
        for start in 0..links.len() {
            let mut chain = Vec::new();
            let mut at = start;
            let base = loop {
                if let Some(d) = depth[at] {
                    break d;
                }
                if chain.contains(&at) {
                    return Err(TreeError::Cycle { key: links[at].key });
                }
                chain.push(at);
                match links[at].parent {
                    None => break 0,
                    Some(p) => {
                        at = *by_key.get(&p).ok_or(TreeError::UnknownParent {
                            key: links[at].key,
                            parent: p,
                        })?;
                    }
                }
            };
            for (k, &node) in chain.iter().rev().enumerate() {
                depth[node] = Some(base + k + 1);
            }
        }
        let mut order: Vec<usize> = (0..links.len()).collect();
        order.sort_by_key(|&i| (depth[i], links[i].key));
        let mut builder = Builder::default();
        let mut id_of: BTreeMap<u64, BudgetId> = BTreeMap::new();
        for i in order {
            let link = &links[i];
            let parent = link.parent.map_or(BudgetId::ROOT, |p| id_of[&p]);
            id_of.insert(link.key, builder.add(parent, &link.name, link.share)?);
        }
        builder.finish()
    }

    /// Adds a share version effective at `effective_from`, starting from the latest shares and
    /// applying `changes`. Versions must be added in time order.
    pub fn add_version<I>(&mut self, effective_from: Time, changes: I) -> Result<(), TreeError>
    where
        I: IntoIterator<Item = (BudgetId, f64)>,
    {
        let latest = self.latest();
        if effective_from <= latest.effective_from {
            return Err(TreeError::VersionOutOfOrder {
                effective_from,
                latest: latest.effective_from,
            });
        }
        let mut shares = latest.shares.clone();
        for (id, share) in changes {
            if id.index() >= self.len() {
                return Err(TreeError::UnknownId { id });
            }
            if id == BudgetId::ROOT {
                return Err(TreeError::RootShare);
            }
            check_share(self.path(id), share)?;
            shares[id.index()] = share;
        }
        let fractions = fractions(&self.parent, &self.children, &shares);
        self.versions.push(ShareVersion {
            effective_from,
            shares,
            fractions,
        });
        Ok(())
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a tree has at least its root and one leaf.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every node id, in pre-order by name (the root first).
    pub fn ids(&self) -> impl Iterator<Item = BudgetId> {
        (0..self.len() as u32).map(BudgetId)
    }

    /// The node with this `/`-separated path (`""` is the root).
    pub fn find(&self, path: &str) -> Option<BudgetId> {
        self.by_path.get(path.trim_matches('/')).copied()
    }

    /// The leaf with this path, or why it cannot take workloads.
    pub fn leaf(&self, path: &str) -> Result<BudgetId, TreeError> {
        let id = self.find(path).ok_or_else(|| TreeError::UnknownNode {
            path: path.to_string(),
        })?;
        if self.is_leaf(id) {
            Ok(id)
        } else {
            Err(TreeError::NotALeaf {
                path: path.to_string(),
            })
        }
    }

    /// The node's own name (`""` for the root).
    pub fn name(&self, id: BudgetId) -> &str {
        &self.names[id.index()]
    }

    /// The node's full path from the root.
    pub fn path(&self, id: BudgetId) -> &str {
        &self.paths[id.index()]
    }

    pub fn parent(&self, id: BudgetId) -> Option<BudgetId> {
        self.parent[id.index()]
    }

    /// Children ordered by name.
    pub fn children(&self, id: BudgetId) -> &[BudgetId] {
        &self.children[id.index()]
    }

    pub fn is_leaf(&self, id: BudgetId) -> bool {
        id != BudgetId::ROOT && self.children[id.index()].is_empty()
    }

    /// Leaves in pre-order by name.
    pub fn leaves(&self) -> impl Iterator<Item = BudgetId> + '_ {
        self.ids().filter(|&id| self.is_leaf(id))
    }

    /// Ancestors from the root's child down to `id` itself (empty for the root).
    pub fn path_ids(&self, id: BudgetId) -> Vec<BudgetId> {
        let mut path = Vec::new();
        let mut at = Some(id);
        while let Some(node) = at.filter(|&n| n != BudgetId::ROOT) {
            path.push(node);
            at = self.parent(node);
        }
        path.reverse();
        path
    }

    /// Every share version, oldest first.
    pub fn versions(&self) -> &[ShareVersion] {
        &self.versions
    }

    /// The share version in force at `t`.
    pub fn version_at(&self, t: Time) -> &ShareVersion {
        let after = self.versions.partition_point(|v| v.effective_from <= t);
        &self.versions[after.saturating_sub(1)]
    }

    /// The most recent share version.
    pub fn latest(&self) -> &ShareVersion {
        self.versions.last().expect("a tree always has a version")
    }

    pub(crate) fn parents(&self) -> &[Option<BudgetId>] {
        &self.parent
    }
}

#[derive(Default)]
struct Builder {
    names: Vec<String>,
    paths: Vec<String>,
    parent: Vec<Option<BudgetId>>,
    children: Vec<Vec<BudgetId>>,
    shares: Vec<f64>,
    by_path: BTreeMap<String, BudgetId>,
}

impl Builder {
    fn add(&mut self, parent: BudgetId, name: &str, share: f64) -> Result<BudgetId, TreeError> {
        if self.names.is_empty() {
            self.push(None, "", String::new(), 1.0);
        }
        check_name(name)?;
        let parent_path = &self.paths[parent.index()];
        let path = if parent_path.is_empty() {
            name.to_string()
        } else {
            format!("{parent_path}/{name}")
        };
        if self.by_path.contains_key(&path) {
            return Err(TreeError::DuplicateName { path });
        }
        Ok(self.push(Some(parent), name, path, share))
    }

    fn push(&mut self, parent: Option<BudgetId>, name: &str, path: String, share: f64) -> BudgetId {
        let id = BudgetId(self.names.len() as u32);
        self.names.push(name.to_string());
        self.by_path.insert(path.clone(), id);
        self.paths.push(path);
        self.parent.push(parent);
        self.children.push(Vec::new());
        self.shares.push(share);
        if let Some(p) = parent {
            self.children[p.index()].push(id);
        }
        id
    }

    /// Renumbers nodes into pre-order by name, so ids and iteration never depend on input order.
    fn finish(self) -> Result<BudgetTree, TreeError> {
        let len = self.names.len();
        if len < 2 {
            return Err(TreeError::Empty);
        }
        let mut order = Vec::with_capacity(len);
        let mut stack = vec![BudgetId::ROOT];
        while let Some(node) = stack.pop() {
            order.push(node);
            let mut kids = self.children[node.index()].clone();
            kids.sort_by(|a, b| self.names[b.index()].cmp(&self.names[a.index()]));
            stack.extend(kids);
        }
        let mut new_id = vec![BudgetId::ROOT; len];
        for (i, old) in order.iter().enumerate() {
            new_id[old.index()] = BudgetId(i as u32);
        }
        let pick = |old: &BudgetId| new_id[old.index()];
        let names: Vec<String> = order
            .iter()
            .map(|o| self.names[o.index()].clone())
            .collect();
        let paths: Vec<String> = order
            .iter()
            .map(|o| self.paths[o.index()].clone())
            .collect();
        let parent: Vec<Option<BudgetId>> = order
            .iter()
            .map(|o| self.parent[o.index()].map(|p| pick(&p)))
            .collect();
        let mut children: Vec<Vec<BudgetId>> = order
            .iter()
            .map(|o| self.children[o.index()].iter().map(pick).collect())
            .collect();
        for kids in &mut children {
            kids.sort();
        }
        let shares: Vec<f64> = order.iter().map(|o| self.shares[o.index()]).collect();
        let by_path = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), BudgetId(i as u32)))
            .collect();
        let fractions = fractions(&parent, &children, &shares);
        Ok(BudgetTree {
            names,
            paths,
            parent,
            children,
            by_path,
            versions: vec![ShareVersion {
                effective_from: Time::MIN,
                shares,
                fractions,
            }],
        })
    }
}

/// Nodes are in pre-order, so each parent's fraction is known before its children's.
fn fractions(parent: &[Option<BudgetId>], children: &[Vec<BudgetId>], shares: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; shares.len()];
    out[0] = 1.0;
    for node in 1..shares.len() {
        let p = parent[node].expect("only the root has no parent").index();
        let total: f64 = children[p].iter().map(|c| shares[c.index()]).sum();
        if total > 0.0 {
            out[node] = out[p] * shares[node] / total;
        }
    }
    out
}

fn check_name(name: &str) -> Result<(), TreeError> {
    if name.is_empty() || name.contains('/') {
        return Err(TreeError::InvalidName {
            name: name.to_string(),
        });
    }
    Ok(())
}

fn check_share(path: &str, share: f64) -> Result<(), TreeError> {
    if !share.is_finite() || share < 0.0 {
        return Err(TreeError::InvalidShare {
            path: path.to_string(),
            share,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org() -> BudgetTree {
        BudgetTree::from_paths([
            ("a", 60.0),
            ("a/a1", 35.0),
            ("a/a2", 25.0),
            ("b", 40.0),
            ("b/b1", 1.0),
        ])
        .unwrap()
    }

    #[test]
    fn fractions_multiply_normalised_shares_along_the_path() {
        let tree = org();
        let v = tree.latest();
        let a1 = tree.find("a/a1").unwrap();
        assert!((v.fraction(a1) - 0.6 * 35.0 / 60.0).abs() < 1e-12);
        assert!((v.fraction(tree.find("b/b1").unwrap()) - 0.4).abs() < 1e-12);
        let leaves: f64 = tree.leaves().map(|l| v.fraction(l)).sum();
        assert!((leaves - 1.0).abs() < 1e-12);
    }

    #[test]
    fn ids_are_pre_order_by_name_whatever_the_input_order() {
        let tree = BudgetTree::from_paths([("b", 1.0), ("a/x", 1.0), ("a", 1.0)]).unwrap();
        let paths: Vec<&str> = tree.ids().map(|i| tree.path(i)).collect();
        assert_eq!(paths, ["", "a", "a/x", "b"]);
    }

    #[test]
    fn inner_path_without_a_share_is_rejected() {
        let err = BudgetTree::from_paths([("a/b", 1.0)]).unwrap_err();
        assert_eq!(err, TreeError::MissingShare { path: "a".into() });
    }

    #[test]
    fn negative_share_is_rejected() {
        let err = BudgetTree::from_paths([("a", -1.0)]).unwrap_err();
        assert!(matches!(err, TreeError::InvalidShare { .. }));
    }

    #[test]
    fn links_with_a_cycle_are_rejected() {
        let link = |key, parent, name: &str| NodeLink {
            key,
            parent,
            name: name.into(),
            share: 1.0,
        };
        let links = [
            link(1, None, "a"),
            link(2, Some(3), "b"),
            link(3, Some(2), "c"),
        ];
        assert!(matches!(
            BudgetTree::from_links(&links),
            Err(TreeError::Cycle { .. })
        ));
        let orphan = [link(1, Some(9), "a")];
        assert_eq!(
            BudgetTree::from_links(&orphan).unwrap_err(),
            TreeError::UnknownParent { key: 1, parent: 9 }
        );
    }

    #[test]
    fn links_build_the_same_tree_as_paths() {
        let link = |key, parent, name: &str, share| NodeLink {
            key,
            parent,
            name: name.into(),
            share,
        };
        let links = [
            link(5, Some(1), "a2", 25.0),
            link(1, None, "a", 60.0),
            link(4, Some(1), "a1", 35.0),
            link(2, None, "b", 40.0),
            link(3, Some(2), "b1", 1.0),
        ];
        let tree = BudgetTree::from_links(&links).unwrap();
        let expected = org();
        for id in expected.ids() {
            assert_eq!(tree.path(id), expected.path(id));
            assert_eq!(tree.latest().fraction(id), expected.latest().fraction(id));
        }
    }

    #[test]
    fn share_versions_apply_from_their_effective_time() {
        let mut tree = org();
        let b = tree.find("b").unwrap();
        tree.add_version(1_000, [(b, 60.0)]).unwrap();
        assert!((tree.version_at(999).fraction(b) - 0.4).abs() < 1e-12);
        assert!((tree.version_at(1_000).fraction(b) - 0.5).abs() < 1e-12);
        assert!(matches!(
            tree.add_version(500, []),
            Err(TreeError::VersionOutOfOrder { .. })
        ));
    }

    #[test]
    fn leaf_lookup_names_unknown_and_inner_paths() {
        let tree = org();
        assert!(tree.leaf("a/a1").is_ok());
        assert_eq!(
            tree.leaf("a").unwrap_err(),
            TreeError::NotALeaf { path: "a".into() }
        );
        assert!(matches!(
            tree.leaf("zz"),
            Err(TreeError::UnknownNode { .. })
        ));
    }
}
