//! GPU nodes as the pages see them: their health, what holds each GPU, and what an admin may
//! do to them.

pub mod api;

use serde::{Deserialize, Serialize};

/// A node just registered: its name as stored and its agent token (shown once). The page builds
/// the agent's command line from these, never from what is left in the form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredNode {
    pub name: String,
    pub token: String,
    #[serde(default)]
    pub cluster: String,
}

/// A node's health as the scheduler sees it: down beats unhealthy beats cordoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeHealth {
    /// Takes new work.
    Healthy,
    /// Failed its own check or was marked by an admin: no new work, drained at minimum runtime.
    Unhealthy,
    /// Under maintenance: no new work, drained at minimum runtime.
    Cordoned,
    /// Its agent stopped answering (or never reported its GPUs).
    Down,
}

crate::named!(NodeHealth, "node state",
    Healthy => "healthy", Unhealthy => "unhealthy", Cordoned => "cordoned", Down => "down");

/// What an admin may do to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeAction {
    /// No new work; running work is drained once its minimum runtime passes.
    Cordon,
    /// The same as cordon, said plainly.
    Drain,
    MarkUnhealthy,
    /// Back in service.
    Uncordon,
}

impl NodeAction {
    pub const ALL: [NodeAction; 4] = [
        NodeAction::Cordon,
        NodeAction::Drain,
        NodeAction::MarkUnhealthy,
        NodeAction::Uncordon,
    ];

    /// The name in URLs and forms.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAction::Cordon => "cordon",
            NodeAction::Drain => "drain",
            NodeAction::MarkUnhealthy => "mark-unhealthy",
            NodeAction::Uncordon => "uncordon",
        }
    }

    /// The button's label.
    pub fn label(self) -> &'static str {
        match self {
            NodeAction::Cordon => "Cordon",
            NodeAction::Drain => "Drain",
            NodeAction::MarkUnhealthy => "Mark unhealthy",
            NodeAction::Uncordon => "Uncordon",
        }
    }

    /// Whether the action would change anything for a node shown in `state`: one that would
    /// leave it where it is is not offered, nor draining a node already draining as unhealthy.
    /// A node that is down may have been cordoned before its agent went silent, so every action
    /// stays offered there.
    pub fn fits(self, state: NodeHealth) -> bool {
        !matches!(
            (self, state),
            (NodeAction::Uncordon, NodeHealth::Healthy)
                | (NodeAction::Cordon, NodeHealth::Cordoned)
                | (
                    NodeAction::MarkUnhealthy | NodeAction::Drain,
                    NodeHealth::Unhealthy
                )
        )
    }

    /// What the action does, asked before it is done.
    pub fn question(self, node: &str) -> String {
        match self {
            NodeAction::Cordon => format!(
                "Cordon {node}? It takes no new work, and what runs there is stopped as its minimum runtime ends (resumable work is queued again)."
            ),
            NodeAction::Drain => format!(
                "Drain {node}? It takes no new work, and each workload on it is preempted as its minimum runtime ends (resumable work is queued again)."
            ),
            NodeAction::MarkUnhealthy => format!(
                "Mark {node} unhealthy? It takes no new work and is drained as minimum runtimes end."
            ),
            NodeAction::Uncordon => format!("Return {node} to service? It takes new work again."),
        }
    }

    /// The admin state the action leaves the node in.
    pub fn admin_state(self) -> NodeHealth {
        match self {
            NodeAction::Cordon | NodeAction::Drain => NodeHealth::Cordoned,
            NodeAction::MarkUnhealthy => NodeHealth::Unhealthy,
            NodeAction::Uncordon => NodeHealth::Healthy,
        }
    }
}

impl std::str::FromStr for NodeAction {
    type Err = crate::names::UnknownName;

    /// Also reads `unhealthy` and `healthy`, the states the actions lead to.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cordon" => Ok(NodeAction::Cordon),
            "drain" => Ok(NodeAction::Drain),
            "mark-unhealthy" | "unhealthy" => Ok(NodeAction::MarkUnhealthy),
            "uncordon" | "healthy" => Ok(NodeAction::Uncordon),
            other => Err(crate::names::UnknownName {
                what: "node action",
                name: other.to_string(),
            }),
        }
    }
}

/// A cluster: a named pool of nodes (`GET /api/v1/clusters`, the clusters menus).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSummary {
    pub name: String,
    /// Registered nodes.
    pub nodes: i64,
    /// Their GPUs.
    pub gpus: i64,
    /// GPUs of nodes that are connected and take new work.
    pub healthy_gpus: i64,
}

/// A GPU node with what holds each of its GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    /// The cluster it belongs to.
    #[serde(default)]
    pub cluster: String,
    pub gpu_model: String,
    pub gpus: i64,
    pub state: NodeHealth,
    pub heartbeat_age_s: Option<i64>,
    /// Why the node's own health check failed, and since when.
    pub health_reason: Option<String>,
    pub unhealthy_since: Option<i64>,
    pub slots: Vec<GpuSlot>,
    /// Out of service with work still on it: when the last protected workload leaves.
    #[serde(default)]
    pub draining: Option<Draining>,
}

/// A node being drained: cordoned or unhealthy while work still runs there. Each workload is
/// stopped as its minimum runtime ends (free work at once); `last` leaves last, at `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Draining {
    pub until: i64,
    pub last: GpuHolder,
    /// Workloads still on the node.
    pub workloads: usize,
}

impl NodeView {
    /// The node's drain, from its state and what holds its GPUs at `now`: `None` unless it is
    /// cordoned or unhealthy with work on it. Work past its protection (or free) leaves at the
    /// scheduler's next pass, so `until` is never before `now`.
    pub fn drain_status(state: NodeHealth, slots: &[GpuSlot], now: i64) -> Option<Draining> {
        if !matches!(state, NodeHealth::Cordoned | NodeHealth::Unhealthy) {
            return None;
        }
        let mut holders: Vec<&GpuHolder> = slots.iter().filter_map(|s| s.holder.as_ref()).collect();
        holders.sort_by_key(|h| h.workload_id);
        holders.dedup_by_key(|h| h.workload_id);
        let leaves = |h: &GpuHolder| h.protected_until.unwrap_or(now).max(now);
        let last = holders.iter().max_by_key(|h| (leaves(h), h.workload_id))?;
        Some(Draining {
            until: leaves(last),
            last: (*last).clone(),
            workloads: holders.len(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSlot {
    pub index: u32,
    pub holder: Option<GpuHolder>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHolder {
    pub workload_id: i64,
    pub name: String,
    pub project: String,
    /// Protected until this time; `None` for free (unallocated) work.
    pub protected_until: Option<i64>,
    pub allocated: bool,
    /// Who submitted it.
    #[serde(default)]
    pub owner: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(index: u32, workload_id: i64, protected_until: Option<i64>) -> GpuSlot {
        GpuSlot {
            index,
            holder: Some(GpuHolder {
                workload_id,
                name: format!("w{workload_id}"),
                project: "ai/olmo".into(),
                protected_until,
                allocated: protected_until.is_some(),
                owner: "ada".into(),
            }),
        }
    }

    #[test]
    fn a_node_out_of_service_drains_until_its_last_protected_workload_leaves() {
        let slots = [
            slot(0, 7, Some(1_600)),
            slot(1, 7, Some(1_600)),
            slot(2, 9, Some(1_300)),
            slot(3, 11, None),
            GpuSlot {
                index: 4,
                holder: None,
            },
        ];
        let drain = NodeView::drain_status(NodeHealth::Cordoned, &slots, 1_000).unwrap();
        assert_eq!(
            (drain.until, drain.last.workload_id, drain.workloads),
            (1_600, 7, 3)
        );
        assert!(NodeView::drain_status(NodeHealth::Healthy, &slots, 1_000).is_none());
        assert!(NodeView::drain_status(NodeHealth::Down, &slots, 1_000).is_none());
        // Past its protection: it leaves at the next pass, now.
        let late = NodeView::drain_status(NodeHealth::Unhealthy, &slots[2..4], 2_000).unwrap();
        assert_eq!(late.until, 2_000);
        let empty = [GpuSlot {
            index: 0,
            holder: None,
        }];
        assert!(
            NodeView::drain_status(NodeHealth::Cordoned, &empty, 1_000).is_none(),
            "drained"
        );
    }

    #[test]
    fn only_actions_that_change_the_nodes_state_are_offered() {
        let offered = |state| {
            NodeAction::ALL
                .into_iter()
                .filter(|a| a.fits(state))
                .map(NodeAction::as_str)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            offered(NodeHealth::Healthy),
            ["cordon", "drain", "mark-unhealthy"]
        );
        assert_eq!(
            offered(NodeHealth::Cordoned),
            ["drain", "mark-unhealthy", "uncordon"]
        );
        assert_eq!(offered(NodeHealth::Unhealthy), ["cordon", "uncordon"]);
        assert_eq!(offered(NodeHealth::Down).len(), 4);
    }
}
