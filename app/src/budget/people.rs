//! Who belongs to a tree node: its owners, a project's members, and the history of both.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Owners decide on a node's children; members charge work to a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantKind {
    Member,
    Owner,
}

crate::named!(GrantKind, "kind of grant", Member => "member", Owner => "owner");

/// One line of a node's people history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantChangeView {
    pub kind: GrantKind,
    /// Added, else removed.
    pub added: bool,
    pub username: String,
    /// Who made the change; `None` for an import by an admin (`hourglass admin import-tree`).
    pub by: Option<String>,
    pub at: i64,
}

/// A node's people as the signed-in person sees them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePeople {
    pub path: String,
    /// A project: it has members.
    pub leaf: bool,
    pub owners: Vec<String>,
    pub members: Vec<String>,
    /// Newest first.
    pub history: Vec<GrantChangeView>,
    pub can_manage_members: bool,
    pub can_manage_owners: bool,
}

/// `path`'s owners, members and their history.
#[server(name = GetNodePeople, prefix = "/api", endpoint = "budget/people")]
pub async fn node_people(path: String) -> Result<NodePeople, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.node_people(&require_user()?, path).await }.await)
}

/// Adds (`add`) or removes `username` as a `kind` (`member` or `owner`) of `path`.
#[server(prefix = "/api", endpoint = "budget/people/change")]
pub async fn change_grant(
    kind: String,
    path: String,
    username: String,
    #[server(default)] add: bool,
) -> Result<NodePeople, AppError> {
    use crate::backend::*;
    with_status(
        async {
            let kind: GrantKind = kind
                .parse()
                .map_err(|e: crate::names::UnknownName| AppError::invalid("kind", e.to_string()))?;
            backend()?
                .change_grant(&require_user()?, kind, path, username, add)
                .await
        }
        .await,
    )
}
