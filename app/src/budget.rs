//! The budget tree and change requests as the pages see them.

use serde::{Deserialize, Serialize};

/// One node of the budget tree with its standing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNodeView {
    pub path: String,
    pub name: String,
    pub depth: usize,
    pub share: f64,
    /// Share as a fraction of the parent (siblings sum to 1).
    pub of_parent: f64,
    /// Effective fraction of the whole cluster.
    pub fraction: f64,
    pub leaf: bool,
    pub owners: Vec<String>,
    pub usage_gpu_h: f64,
    pub allocated_gpu_h: f64,
    pub ratio: Option<f64>,
    /// Whether the signed-in person may propose a change to this node's children.
    pub can_propose: bool,
    pub children_version: i64,
}

/// One child in a change request: its share before and after, and what happens to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeItem {
    pub child: String,
    /// `set`, `add`, `rename` or `remove`.
    pub action: String,
    pub old_share: Option<f64>,
    pub new_share: Option<f64>,
    pub new_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeRequestView {
    pub id: i64,
    pub node: String,
    pub proposer: String,
    pub justification: String,
    pub base_version: i64,
    pub effective_at: Option<i64>,
    /// `pending`, `scheduled`, `applied`, `rejected` or `stale`.
    pub state: String,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub decided_by: Option<String>,
    pub comment: String,
    pub items: Vec<ChangeItem>,
    /// Whether the signed-in person may approve or reject it now.
    pub can_decide: bool,
}
