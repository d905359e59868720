//! A tree node's share history: every share it had, where each came from, and its effective
//! share of the cluster over time.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareHistory {
    pub path: String,
    /// Oldest first.
    pub versions: Vec<ShareVersionView>,
    /// `(from, fraction of the cluster)` at each moment it changed, its own share or another's
    /// on its path, oldest first.
    pub fraction: Vec<(i64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareVersionView {
    pub from: i64,
    /// `None` while in force.
    pub to: Option<i64>,
    pub share: f64,
    pub origin: ShareSource,
    /// The cluster it was set for alone (an override of the tree's share there), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// Where a share came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ShareSource {
    /// The node was created with it.
    Created,
    /// An approved change request.
    Request {
        id: i64,
        proposer: String,
        decided_by: Option<String>,
        justification: String,
    },
    /// An admin imported the tree file.
    Import,
}

impl ShareSource {
    /// In words, for the history's table.
    pub fn describe(&self) -> String {
        match self {
            ShareSource::Created => "set when the node was created".into(),
            ShareSource::Import => "imported from the tree file by an admin".into(),
            ShareSource::Request {
                id,
                proposer,
                decided_by,
                justification,
            } => format!(
                "request #{id}, proposed by {proposer}{}: \u{201c}{justification}\u{201d}",
                decided_by
                    .as_deref()
                    .map_or(String::new(), |d| format!(", approved by {d}"))
            ),
        }
    }
}

#[server(name = GetShareHistory, prefix = "/api", endpoint = "budget/shares")]
pub async fn share_history(path: String) -> Result<ShareHistory, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.share_history(&require_user()?, path).await }.await)
}
