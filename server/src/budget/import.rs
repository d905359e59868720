//! `hourglass admin import-tree`: load an organisation in one step, in one transaction.

use super::{
    org_file::OrgFile,
    repo::{self, Grant, ShareOrigin},
};
use crate::ServerError;
use app::budget::people::GrantKind;
use sqlx::AnyPool;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub created: usize,
    pub reshared: usize,
    pub unchanged: usize,
}

/// Creates missing nodes, opens a new share version (at `now`) for every changed share, and
/// replaces the owners and members of every path the file lists. Unknown usernames refuse the
/// whole import: nothing changes.
pub async fn import_org(
    pool: &AnyPool,
    org: &OrgFile,
    now: i64,
) -> Result<ImportSummary, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let mut summary = ImportSummary::default();
    let root = match repo::find_node_by_path(&mut tx, "").await? {
        Some(id) => id,
        None => {
            let id = repo::insert_budget_node(&mut *tx, None, "cluster", "", now).await?;
            repo::set_share(&mut tx, id, 1.0, now, ShareOrigin::Created).await?;
            id
        }
    };
    for (path, share) in &org.shares {
        let (parent_path, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        let existing = repo::find_node_by_path(&mut tx, path).await?;
        let node_id = match existing {
            Some(id) => id,
            None => {
                let parent = if parent_path.is_empty() {
                    root
                } else {
                    repo::find_node_by_path(&mut tx, parent_path)
                        .await?
                        .ok_or_else(|| {
                            ServerError::invalid("shares", format!("no parent for \"{path}\""))
                        })?
                };
                summary.created += 1;
                let id = repo::insert_budget_node(&mut *tx, Some(parent), name, path, now).await?;
                repo::set_share(&mut tx, id, *share, now, ShareOrigin::Import).await?;
                continue;
            }
        };
        match repo::current_share(&mut tx, node_id).await? {
            Some(current) if (current - share).abs() < 1e-12 => summary.unchanged += 1,
            _ => {
                repo::set_share(&mut tx, node_id, *share, now, ShareOrigin::Import).await?;
                summary.reshared += 1;
            }
        }
    }
    for (grant, kind, table, field) in [
        (Grant::Owner, GrantKind::Owner, &org.owners, "owners"),
        (Grant::Member, GrantKind::Member, &org.members, "members"),
    ] {
        for (path, usernames) in table {
            let node_id = repo::find_node_by_path(&mut tx, path)
                .await?
                .ok_or_else(|| {
                    ServerError::invalid(field, format!("\"{path}\" is not in the tree"))
                })?;
            let mut user_ids = Vec::new();
            for username in usernames {
                let id = repo::user_id_by_name(&mut *tx, username.trim()).await?;
                user_ids.push(id.ok_or_else(|| {
                    ServerError::invalid(
                        field,
                        format!("[{field}] \"{path}\" names \"{username}\", who has no account; create it first"),
                    )
                })?);
            }
            user_ids.sort_unstable();
            user_ids.dedup();
            // Kept in the node's people history as an admin's import (no one named).
            let (added, removed) = repo::replace_grants(&mut tx, grant, node_id, &user_ids).await?;
            for (users, add) in [(added, true), (removed, false)] {
                for user in users {
                    super::people::record(&mut tx, node_id, kind, add, user, None, now).await?;
                }
            }
        }
    }
    tx.commit().await?;
    Ok(summary)
}
