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
            NodeAction::Cordon => format!("Cordon {node}? It takes no new work; what runs there keeps running."),
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

/// A GPU node with what holds each of its GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub gpu_model: String,
    pub gpus: i64,
    pub state: NodeHealth,
    pub heartbeat_age_s: Option<i64>,
    /// Why the node's own health check failed, and since when.
    pub health_reason: Option<String>,
    pub unhealthy_since: Option<i64>,
    pub slots: Vec<GpuSlot>,
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
