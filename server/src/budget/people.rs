//! Who belongs to the tree: owners add and remove members of the projects in their subtree and
//! owners of the nodes below their own; each change is kept in the node's people history.

use super::{
    changes::{policy::Owners, repo as changes_repo},
    repo::{find_node_by_path, user_id_by_name, Grant},
};
use crate::ServerError;
use app::{
    budget::people::{GrantChangeView, GrantKind, NodePeople},
    model::CurrentUser,
};
use sqlx::{AnyConnection, AnyPool};

/// A node's parent path (`""` for a top-level node); `None` for the root.
fn parent(path: &str) -> Option<&str> {
    (!path.is_empty()).then(|| path.rsplit_once('/').map_or("", |(p, _)| p))
}

/// Whether `actor` may change who holds `kind` on `path`: members of a project, by an owner of
/// it or a node above; owners of a node, by an owner of a node above it. Admins always.
pub fn may_manage(owners: &Owners, actor: &CurrentUser, kind: GrantKind, path: &str) -> bool {
    if actor.is_admin() {
        return true;
    }
    let from = match kind {
        GrantKind::Member => Some(path),
        GrantKind::Owner => parent(path),
    };
    from.is_some_and(|p| owners.owns_at_or_above(p, actor.id))
}

fn grant(kind: GrantKind) -> Grant {
    match kind {
        GrantKind::Member => Grant::Member,
        GrantKind::Owner => Grant::Owner,
    }
}

/// The node's name in sentences: "the cluster" for the root.
fn node_name(path: &str) -> String {
    if path.is_empty() {
        "the cluster".into()
    } else {
        path.to_string()
    }
}

/// Adds (`add`) or removes `username` as `kind` of `path`, recorded with `actor` and `now`;
/// returns the node's people after it. Nothing changes on any error.
pub async fn change(
    pool: &AnyPool,
    actor: &CurrentUser,
    kind: GrantKind,
    path: &str,
    username: &str,
    add: bool,
    now: i64,
) -> Result<NodePeople, ServerError> {
    let path = path.trim().trim_matches('/');
    let username = username.trim();
    let mut tx = crate::db::begin_write(pool).await?;
    let Some(node) = find_node_by_path(&mut tx, path).await? else {
        return Err(ServerError::invalid(
            "path",
            format!("path: there is no node {path:?} in the tree."),
        ));
    };
    let owners = changes_repo::owners(&mut *tx).await?;
    if !may_manage(&owners, actor, kind, path) {
        let who = match (kind, parent(path)) {
            (GrantKind::Member, _) => {
                format!("an owner of {} or of a node above it", node_name(path))
            }
            (GrantKind::Owner, Some(p)) => {
                format!("an owner of {} or of a node above it", node_name(p))
            }
            (GrantKind::Owner, None) => "an admin".into(),
        };
        return Err(ServerError::Forbidden(format!(
            "Only {who} may change the {}s of {}.",
            kind.as_str(),
            node_name(path)
        )));
    }
    if kind == GrantKind::Member && has_children(&mut tx, node).await? {
        return Err(ServerError::invalid(
            "path",
            format!(
                "path: members charge work to a project, and {path} has projects below it; add them to one of those."
            ),
        ));
    }
    if username.is_empty() {
        return Err(ServerError::invalid(
            "username",
            "username: whom? Name an account.",
        ));
    }
    let Some(user) = user_id_by_name(&mut *tx, username).await? else {
        return Err(ServerError::invalid(
            "username",
            format!("username: there is no account named {username:?}."),
        ));
    };
    let table = grant(kind).table();
    let held: bool = sqlx::query_scalar::<_, i64>(&format!(
        "select count(*) from {table} where budget_node_id = $1 and user_id = $2"
    ))
    .bind(node)
    .bind(user)
    .fetch_one(&mut *tx)
    .await?
        > 0;
    match (add, held) {
        (true, true) => {
            return Err(ServerError::conflict(
                "username",
                format!(
                    "{username} is already a {} of {}.",
                    kind.as_str(),
                    node_name(path)
                ),
            ))
        }
        (false, false) => {
            return Err(ServerError::conflict(
                "username",
                format!(
                    "{username} is not a {} of {}.",
                    kind.as_str(),
                    node_name(path)
                ),
            ))
        }
        (true, false) => {
            sqlx::query(&format!(
                "insert into {table} (budget_node_id, user_id) values ($1, $2)"
            ))
            .bind(node)
            .bind(user)
            .execute(&mut *tx)
            .await?;
        }
        (false, true) => {
            sqlx::query(&format!(
                "delete from {table} where budget_node_id = $1 and user_id = $2"
            ))
            .bind(node)
            .bind(user)
            .execute(&mut *tx)
            .await?;
        }
    }
    record(&mut tx, node, kind, add, user, Some(actor.id), now).await?;
    tx.commit().await?;
    people(pool, actor, path).await
}

/// One line of a node's people history.
pub async fn record(
    db: &mut AnyConnection,
    node: i64,
    kind: GrantKind,
    added: bool,
    user: i64,
    by: Option<i64>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into grant_change (budget_node_id, grant_kind, added, user_id, changed_by, changed_at)
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(node)
    .bind(kind.as_str())
    .bind(i64::from(added))
    .bind(user)
    .bind(by)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

async fn has_children(db: &mut AnyConnection, node: i64) -> Result<bool, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(
        "select count(*) from budget_node where parent_id = $1 and removed_at is null",
    )
    .bind(node)
    .fetch_one(db)
    .await?;
    Ok(n > 0)
}

/// `path`'s owners and members, its people history (newest first) and what `actor` may change.
pub async fn people(
    pool: &AnyPool,
    actor: &CurrentUser,
    path: &str,
) -> Result<NodePeople, ServerError> {
    let mut db = pool.acquire().await?;
    let node = super::node_id(&mut db, path).await?;
    let names = |table: &'static str| {
        format!(
            "select u.username from {table} g join \"user\" u on u.user_id = g.user_id
             where g.budget_node_id = $1 order by u.username"
        )
    };
    let owner_names: Vec<String> = sqlx::query_scalar(&names("budget_owner"))
        .bind(node)
        .fetch_all(&mut *db)
        .await?;
    let members: Vec<String> = sqlx::query_scalar(&names("budget_member"))
        .bind(node)
        .fetch_all(&mut *db)
        .await?;
    let rows: Vec<(String, i64, String, Option<String>, i64)> = sqlx::query_as(
        "select c.grant_kind, c.added, u.username, b.username, c.changed_at from grant_change c
         join \"user\" u on u.user_id = c.user_id
         left join \"user\" b on b.user_id = c.changed_by
         where c.budget_node_id = $1 order by c.changed_at desc, c.grant_change_id desc limit 200",
    )
    .bind(node)
    .fetch_all(&mut *db)
    .await?;
    let history = rows
        .into_iter()
        .filter_map(|(kind, added, username, by, at)| {
            Some(GrantChangeView {
                kind: kind.parse().ok()?,
                added: added != 0,
                username,
                by,
                at,
            })
        })
        .collect();
    let leaf = !has_children(&mut db, node).await?;
    let owners = changes_repo::owners(&mut *db).await?;
    Ok(NodePeople {
        path: path.to_string(),
        leaf,
        owners: owner_names,
        members,
        history,
        can_manage_members: leaf && may_manage(&owners, actor, GrantKind::Member, path),
        can_manage_owners: may_manage(&owners, actor, GrantKind::Owner, path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::Role;
    use std::collections::HashMap;

    fn user(id: i64, role: Role) -> CurrentUser {
        CurrentUser {
            id,
            username: format!("u{id}"),
            role,
        }
    }

    #[test]
    fn an_owner_manages_members_at_and_below_and_owners_strictly_below() {
        let owners = Owners(HashMap::from([("ai".to_string(), vec![7])]));
        let pat = user(7, Role::Researcher);
        assert!(may_manage(&owners, &pat, GrantKind::Member, "ai/olmo"));
        assert!(may_manage(&owners, &pat, GrantKind::Owner, "ai/olmo"));
        assert!(
            !may_manage(&owners, &pat, GrantKind::Owner, "ai"),
            "not their own node's owners"
        );
        assert!(!may_manage(
            &owners,
            &pat,
            GrantKind::Member,
            "vision/robotics"
        ));
        let ada = user(8, Role::Researcher);
        assert!(!may_manage(&owners, &ada, GrantKind::Member, "ai/olmo"));
        assert!(may_manage(
            &owners,
            &user(1, Role::Admin),
            GrantKind::Owner,
            ""
        ));
        assert!(
            !may_manage(&owners, &pat, GrantKind::Owner, ""),
            "the root's: admins"
        );
    }
}
