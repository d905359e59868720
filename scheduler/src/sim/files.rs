//! `TREE.toml` and `CLUSTER.toml` (DESIGN §6), parsed from text into engine types.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::input::{line_of, InputError};
use crate::cluster::{Health, MAX_GPUS_PER_NODE};
use crate::ids::{NodeId, Time};
use crate::tree::{BudgetTree, TreeError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeFile {
    shares: BTreeMap<String, Spanned<f64>>,
}

/// Parses `TREE.toml`: a `[shares]` table of `"program/project" = share` pairs.
pub fn parse_tree(text: &str) -> Result<BudgetTree, InputError> {
    let file: TreeFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let line_of_key = |path: &str| {
        file.shares
            .get(path.trim_matches('/'))
            .map(|v| line_of(text, v.span().start))
    };
    BudgetTree::from_paths(file.shares.iter().map(|(k, v)| (k.as_str(), *v.get_ref()))).map_err(
        |e| {
            let (path, line) = match &e {
                TreeError::InvalidShare { path, .. } | TreeError::DuplicateName { path } => {
                    (path.clone(), line_of_key(path))
                }
                TreeError::MissingShare { path } => {
                    let child = file
                        .shares
                        .keys()
                        .find(|k| k.starts_with(&format!("{path}/")))
                        .cloned()
                        .unwrap_or_default();
                    (path.clone(), line_of_key(&child))
                }
                TreeError::InvalidName { name } => (name.clone(), line_of_key(name)),
                _ => (String::new(), None),
            };
            let field = format!("shares.\"{path}\"");
            InputError::new(line, Some(&field), e.to_string())
        },
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    nodes: Vec<Spanned<NodeGroup>>,
    #[serde(default)]
    outages: Vec<Spanned<OutageRow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeGroup {
    count: u32,
    gpus_per_node: u32,
    name_prefix: Option<String>,
    gpu_model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutageRow {
    node: String,
    from_s: Time,
    to_s: Time,
    state: String,
}

/// The simulated hosts, numbered in file order (`NodeId(0)` first).
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub nodes: Vec<ClusterNode>,
    /// Sorted by node, then start.
    pub outages: Vec<Outage>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterNode {
    /// `name_prefix` (default `node-`) and a 3-digit index counted per prefix: `node-000`.
    pub name: String,
    pub gpus: u32,
    pub gpu_model: Option<String>,
}

/// A host out of service over `[from, to)`: `Unhealthy` drains it as protections end, `Down`
/// loses its work at once. It is healthy again at `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    pub node: NodeId,
    pub from: Time,
    pub to: Time,
    pub state: Health,
}

impl Cluster {
    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// The largest host: workloads asking for more are gangs of whole hosts.
    pub fn node_size(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).max().unwrap_or(0)
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }
}

/// The most hosts a cluster file may describe (a bound on what a file can make us allocate).
pub const MAX_HOSTS: usize = 100_000;

/// Parses `CLUSTER.toml`: `[[nodes]]` groups and optional `[[outages]]`.
pub fn parse_cluster(text: &str) -> Result<Cluster, InputError> {
    let file: ClusterFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let mut nodes = Vec::new();
    let mut next_index: BTreeMap<String, u32> = BTreeMap::new();
    for group in &file.nodes {
        let line = line_of(text, group.span().start);
        let g = group.get_ref();
        if g.gpus_per_node == 0 || g.gpus_per_node > MAX_GPUS_PER_NODE {
            return Err(InputError::at(
                line,
                "gpus_per_node",
                format!("must be 1..={MAX_GPUS_PER_NODE}, got {}", g.gpus_per_node),
            ));
        }
        if g.count == 0 {
            return Err(InputError::at(line, "count", "must be at least 1"));
        }
        if nodes.len() as u64 + u64::from(g.count) > MAX_HOSTS as u64 {
            return Err(InputError::at(
                line,
                "count",
                format!("the cluster may have at most {MAX_HOSTS} hosts"),
            ));
        }
        let prefix = g.name_prefix.clone().unwrap_or_else(|| "node-".into());
        let next = next_index.entry(prefix.clone()).or_insert(0);
        for _ in 0..g.count {
            nodes.push(ClusterNode {
                name: format!("{prefix}{:03}", *next),
                gpus: g.gpus_per_node,
                gpu_model: g.gpu_model.clone(),
            });
            *next += 1;
        }
    }
    if nodes.is_empty() {
        return Err(InputError::new(
            None,
            Some("nodes"),
            "the cluster has no nodes",
        ));
    }
    let mut cluster = Cluster {
        nodes,
        outages: Vec::new(),
    };
    for outage in &file.outages {
        let line = line_of(text, outage.span().start);
        let o = outage.get_ref();
        let node = cluster
            .node_by_name(&o.node)
            .ok_or_else(|| InputError::at(line, "node", format!("no node named `{}`", o.node)))?;
        let state = match o.state.as_str() {
            "unhealthy" => Health::Unhealthy,
            "down" => Health::Down,
            "cordoned" => Health::Cordoned,
            other => {
                return Err(InputError::at(
                    line,
                    "state",
                    format!("expected `unhealthy` or `down`, got `{other}`"),
                ))
            }
        };
        if o.from_s < 0 {
            return Err(InputError::at(line, "from_s", "must be ≥ 0"));
        }
        if o.to_s <= o.from_s {
            return Err(InputError::at(line, "to_s", "must be after from_s"));
        }
        let overlaps = cluster
            .outages
            .iter()
            .any(|x| x.node == node && x.from < o.to_s && o.from_s < x.to);
        if overlaps {
            return Err(InputError::at(
                line,
                "from_s",
                format!("overlaps another outage of `{}`", o.node),
            ));
        }
        cluster.outages.push(Outage {
            node,
            from: o.from_s,
            to: o.to_s,
            state,
        });
    }
    cluster.outages.sort_by_key(|o| (o.node, o.from));
    Ok(cluster)
}

fn toml_error(text: &str, e: &toml::de::Error) -> InputError {
    let line = e.span().map(|s| line_of(text, s.start));
    let message = e.message().trim().to_string();
    // serde names the offending key in backticks: surface it as the field.
    let field = message
        .split('`')
        .nth(1)
        .filter(|_| message.contains("field") || message.contains("key"))
        .map(str::to_string)
        .or_else(|| {
            // A bad value: the key is what stands before `=` on its line.
            let start = e.span()?.start;
            let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
            let (key, _) = text[line_start..].split_once('=')?;
            let key = key.trim().trim_matches('"');
            (!key.is_empty() && !key.contains('\n')).then(|| key.to_string())
        });
    InputError {
        line,
        field,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_file_builds_fractions_from_nested_shares() {
        let tree = parse_tree("[shares]\na = 3\n\"a/x\" = 1\n\"a/y\" = 1.0\nb = 1\n").unwrap();
        let x = tree.leaf("a/x").unwrap();
        assert!((tree.latest().fraction(x) - 0.375).abs() < 1e-12);
    }

    #[test]
    fn a_tree_file_with_a_missing_parent_share_names_the_line() {
        let err = parse_tree("[shares]\nb = 1\n\"a/x\" = 1\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.to_string().contains("`a` has children but no share"));
    }

    #[test]
    fn a_tree_file_with_a_non_number_share_names_the_line() {
        let err = parse_tree("[shares]\na = 1\nb = \"lots\"\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(err.field.as_deref(), Some("b"));
    }

    #[test]
    fn cluster_groups_name_their_nodes_and_outages_refer_to_them() {
        let text = "[[nodes]]\ncount = 2\ngpus_per_node = 8\nname_prefix = \"h100-\"\n\n\
                    [[nodes]]\ncount = 1\ngpus_per_node = 4\n\n\
                    [[outages]]\nnode = \"h100-001\"\nfrom_s = 10\nto_s = 20\nstate = \"down\"\n";
        let cluster = parse_cluster(text).unwrap();
        let names: Vec<&str> = cluster.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["h100-000", "h100-001", "node-000"]);
        assert_eq!(cluster.total_gpus(), 20);
        assert_eq!(cluster.outages[0].node, NodeId(1));
        assert_eq!(cluster.outages[0].state, Health::Down);
    }

    #[test]
    fn an_outage_on_an_unknown_node_names_the_line_and_field() {
        let text = "[[nodes]]\ncount = 1\ngpus_per_node = 8\n\n[[outages]]\nnode = \"x\"\n\
                    from_s = 0\nto_s = 5\nstate = \"down\"\n";
        let err = parse_cluster(text).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("node"));
        assert_eq!(err.line, Some(5));
    }

    #[test]
    fn a_misspelled_cluster_key_is_rejected_with_its_line() {
        let huge = parse_cluster("[[nodes]]\ncount = 4000000000\ngpus_per_node = 8\n").unwrap_err();
        assert_eq!(huge.field.as_deref(), Some("count"), "{huge}");
        let err = parse_cluster("[[nodes]]\ncount = 1\ngpus = 8\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.field.is_some(), "{err}");
    }
}
