//! The budget tree and change requests as the pages see them.

pub mod api;

use serde::{Deserialize, Serialize};

/// Where a change request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeState {
    /// Waiting for an owner's decision.
    Pending,
    /// Approved, applied at its effective date.
    Scheduled,
    Applied,
    Rejected,
    /// Another change to the node's shares landed first: it must be rebased.
    Stale,
    /// Its proposer took it back (or rebased it: then `replaced_by` names the new request).
    Withdrawn,
}

/// What a change request does to one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeAction {
    Set,
    Add,
    Rename,
    Remove,
}

impl ChangeState {
    /// What the state means for the people who proposed and decide, in a sentence.
    pub fn meaning(self) -> &'static str {
        match self {
            ChangeState::Pending => "waiting for an owner's decision",
            ChangeState::Scheduled => "approved; takes effect at its date",
            ChangeState::Applied => "approved and in effect",
            ChangeState::Rejected => "rejected by an owner",
            ChangeState::Stale => {
                "another change to the same shares took effect first, so this one no longer applies to today's shares: its proposer can rebase it onto them"
            }
            ChangeState::Withdrawn => "taken back by its proposer",
        }
    }
}

pub mod people;
pub mod shares;

crate::named!(ChangeState, "change request state",
    Pending => "pending", Scheduled => "scheduled", Applied => "applied", Rejected => "rejected",
    Stale => "stale", Withdrawn => "withdrawn");
crate::named!(ChangeAction, "change action",
    Set => "set", Add => "add", Rename => "rename", Remove => "remove");

/// One node of the budget tree with its standing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNodeView {
    pub path: String,
    pub name: String,
    pub depth: usize,
    pub share: f64,
    /// The tree's own share now, the one every cluster uses unless a change for one cluster
    /// alone overrides it there (then `share` is that cluster's). `None` for the root.
    #[serde(default)]
    pub tree_share: Option<f64>,
    /// Share as a fraction of the parent (siblings sum to 1).
    pub of_parent: f64,
    /// Effective fraction of the whole cluster.
    pub fraction: f64,
    pub leaf: bool,
    pub owners: Vec<String>,
    pub usage_gpu_h: f64,
    pub allocated_gpu_h: f64,
    pub ratio: Option<f64>,
    /// Mean GPU utilization of its subtree's sampled GPU time over the lookback window (0–1;
    /// `None`: nothing sampled).
    #[serde(default)]
    pub utilization: Option<f64>,
    /// Whether the signed-in person may propose a change to this node's children.
    pub can_propose: bool,
    pub children_version: i64,
}

/// One child in a change request: its share before and after, and what happens to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(sqlx::FromRow))]
pub struct ChangeItem {
    pub child: String,
    #[cfg_attr(feature = "ssr", sqlx(try_from = "String"))]
    pub action: ChangeAction,
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
    pub state: ChangeState,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub decided_by: Option<String>,
    pub comment: String,
    pub items: Vec<ChangeItem>,
    /// Whether the signed-in person may approve or reject it now.
    pub can_decide: bool,
    /// Whether the signed-in person proposed it and it still waits: they may withdraw it.
    pub can_withdraw: bool,
    /// Whether the signed-in person proposed it and it went stale: they may rebase it onto
    /// today's shares (a new request; this one is withdrawn in its favour).
    pub can_rebase: bool,
    /// The request that replaced this one when it was rebased.
    pub replaced_by: Option<i64>,
    /// The cluster it changes shares on; none: every cluster.
    #[serde(default)]
    pub cluster: Option<String>,
}

/// What the rebalancing form submits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposalInput {
    pub node: String,
    /// Every child after the change: full path (a new path adds a child), share, optional new name.
    pub children: Vec<ChildShare>,
    pub justification: String,
    /// `YYYY-MM-DD` (UTC midnight), or empty for "on approval".
    pub effective_date: String,
    /// One cluster's name, or empty for every cluster.
    #[serde(default)]
    pub cluster: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildShare {
    pub path: String,
    pub share: f64,
    pub new_name: Option<String>,
}

/// What-if for a change request: the last days of real submissions replayed through the simulator
/// with the current and the proposed shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactView {
    pub days: u32,
    pub workloads: usize,
    pub gpus: u32,
    pub rows: Vec<ImpactRow>,
    /// Wall time of both replays, milliseconds.
    pub wall_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactRow {
    pub path: String,
    /// The leaf's effective fraction of the cluster with today's and with the proposed shares.
    #[serde(default)]
    pub share_now: f64,
    #[serde(default)]
    pub share_proposed: f64,
    pub delivered_now_gpu_h: f64,
    pub delivered_proposed_gpu_h: f64,
    /// Predicted usage ratio over the replay: delivered over funded (its fraction of the
    /// cluster's GPU-hours); `None` when nothing is funded.
    #[serde(default)]
    pub ratio_now: Option<f64>,
    #[serde(default)]
    pub ratio_proposed: Option<f64>,
    pub p90_wait_now_s: Option<i64>,
    pub p90_wait_proposed_s: Option<i64>,
}
