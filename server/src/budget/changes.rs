//! Change requests (DESIGN §3): propose new shares for a node's children, decide as an owner,
//! never approve your own, never apply over newer shares, apply scheduled ones at their time.

use crate::{users::service::now, ServerError};
use app::{
    budget::{ChangeItem, ChangeRequestView},
    model::CurrentUser,
};
use serde::Deserialize;
use sqlx::{AnyConnection, AnyPool};
use std::collections::BTreeMap;

/// `POST /api/v1/change-requests`: `shares` lists every child after the change, by full path
/// (a new path adds a child, a missing one removes it); `renames` maps a child's path to its new name.
#[derive(Debug, Clone, Deserialize)]
pub struct Proposal {
    pub node: String,
    pub shares: BTreeMap<String, f64>,
    #[serde(default)]
    pub renames: BTreeMap<String, String>,
    pub justification: String,
    #[serde(default)]
    pub effective_at: Option<i64>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct NodeRow {
    budget_node_id: i64,
    path: String,
    children_version: i64,
}

async fn node_by_path(db: &mut AnyConnection, path: &str) -> Result<Option<NodeRow>, ServerError> {
    Ok(sqlx::query_as(
        "select budget_node_id, path, children_version from budget_node where path = $1 and removed_at is null",
    )
    .bind(path.trim().trim_matches('/'))
    .fetch_optional(&mut *db)
    .await?)
}

/// `(child id, name, current share)` of the node's live children.
async fn children(
    db: &mut AnyConnection,
    node_id: i64,
) -> Result<Vec<(i64, String, f64)>, ServerError> {
    Ok(sqlx::query_as(
        "select b.budget_node_id, b.name, coalesce(s.share, 0.0) from budget_node b
         left join share_version s on s.budget_node_id = b.budget_node_id and s.effective_to is null
         where b.parent_id = $1 and b.removed_at is null order by b.name",
    )
    .bind(node_id)
    .fetch_all(&mut *db)
    .await?)
}

/// Owners of `path` and of each ancestor, nearest first: `(path, user ids)`.
async fn owner_chain(
    db: &mut AnyConnection,
    path: &str,
) -> Result<Vec<(String, Vec<i64>)>, ServerError> {
    let mut chain = Vec::new();
    let mut current = Some(path.to_string());
    while let Some(p) = current {
        let owners: Vec<i64> = sqlx::query_scalar(
            "select o.user_id from budget_owner o join budget_node b on b.budget_node_id = o.budget_node_id
             where b.path = $1",
        )
        .bind(&p)
        .fetch_all(&mut *db)
        .await?;
        current = if p.is_empty() {
            None
        } else {
            Some(
                p.rsplit_once('/')
                    .map(|(a, _)| a.to_string())
                    .unwrap_or_default(),
            )
        };
        chain.push((p, owners));
    }
    Ok(chain)
}

/// Anyone in the subtree may propose: an owner of the node or an ancestor, a member of a leaf
/// under it, or an admin.
pub async fn may_propose(
    db: &mut AnyConnection,
    actor: &CurrentUser,
    path: &str,
) -> Result<bool, ServerError> {
    if actor.is_admin()
        || owner_chain(db, path)
            .await?
            .iter()
            .any(|(_, owners)| owners.contains(&actor.id))
    {
        return Ok(true);
    }
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    let member: Option<i64> = sqlx::query_scalar(
        "select 1 from budget_member m join budget_node b on b.budget_node_id = m.budget_node_id
         where m.user_id = $1 and (b.path = $2 or substr(b.path, 1, length($3)) = $3) limit 1",
    )
    .bind(actor.id)
    .bind(path)
    .bind(&prefix)
    .fetch_optional(&mut *db)
    .await?;
    Ok(member.is_some())
}

/// An owner of the node decides (owners of ancestors too); no one decides their own request,
/// and an owner's own proposal needs another owner of the node or an owner of the parent.
async fn may_decide(
    db: &mut AnyConnection,
    actor: &CurrentUser,
    path: &str,
    proposer_id: i64,
) -> Result<Result<(), String>, ServerError> {
    if actor.id == proposer_id {
        return Ok(Err(
            "You cannot decide your own request; another owner must.".into(),
        ));
    }
    let chain = owner_chain(db, path).await?;
    let node_owners = &chain[0].1;
    let proposer_owns_node = node_owners.contains(&proposer_id);
    let allowed = if proposer_owns_node {
        node_owners.contains(&actor.id)
            || chain
                .get(1)
                .is_some_and(|(_, parent)| parent.contains(&actor.id))
    } else {
        chain.iter().any(|(_, owners)| owners.contains(&actor.id))
    };
    Ok(if allowed {
        Ok(())
    } else if proposer_owns_node {
        Err(
            "An owner's own proposal needs another owner of this node or an owner of its parent."
                .into(),
        )
    } else {
        Err("Only an owner of this node (or of a node above it) can decide this request.".into())
    })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

pub async fn propose(
    pool: &AnyPool,
    actor: &CurrentUser,
    proposal: Proposal,
) -> Result<ChangeRequestView, ServerError> {
    let now = now();
    let mut tx = crate::db::begin_write(pool).await?;
    let node = node_by_path(&mut tx, &proposal.node)
        .await?
        .ok_or_else(|| {
            ServerError::invalid(
                "node",
                format!("There is no node \"{}\" in the budget tree.", proposal.node),
            )
        })?;
    if !may_propose(&mut tx, actor, &node.path).await? {
        return Err(ServerError::Forbidden(format!(
            "Only people in \"{}\"'s subtree (its members and owners) can propose changes to it.",
            node.path
        )));
    }
    if proposal.justification.trim().is_empty() {
        return Err(ServerError::invalid(
            "justification",
            "Say why: a decision needs a justification.",
        ));
    }
    if let Some(at) = proposal.effective_at {
        if at < now - 60 {
            return Err(ServerError::invalid(
                "effective_at",
                "The effective date is in the past.",
            ));
        }
    }
    if proposal.shares.is_empty() {
        return Err(ServerError::invalid(
            "shares",
            "List the shares of the node's children after the change.",
        ));
    }
    let prefix = if node.path.is_empty() {
        String::new()
    } else {
        format!("{}/", node.path)
    };
    let current = children(&mut tx, node.budget_node_id).await?;
    let mut items: BTreeMap<String, ChangeItem> = BTreeMap::new();
    let mut total = 0.0;
    for (path, &share) in &proposal.shares {
        let name = path.trim().strip_prefix(&prefix).unwrap_or("");
        if !valid_name(name) {
            return Err(ServerError::invalid(
                "shares",
                format!("\"{path}\" is not a child of \"{}\" with a valid name (lowercase letters, digits, '-', '_', '.').", node.path),
            ));
        }
        if !share.is_finite() || share < 0.0 {
            return Err(ServerError::invalid(
                "shares",
                format!("The share of \"{path}\" must be 0 or more."),
            ));
        }
        total += share;
        let old = current.iter().find(|(_, n, _)| n == name).map(|c| c.2);
        let new_name = proposal
            .renames
            .get(path.trim())
            .map(|n| n.trim().to_string());
        if let Some(new_name) = &new_name {
            if !valid_name(new_name)
                || (new_name != name
                    && (current.iter().any(|(_, n, _)| n == new_name)
                        || proposal.shares.contains_key(&format!("{prefix}{new_name}"))))
            {
                return Err(ServerError::invalid(
                    "renames",
                    format!("\"{new_name}\" is not a valid, unused name."),
                ));
            }
        }
        let action = match (old, &new_name) {
            (None, _) => "add",
            (Some(_), Some(n)) if n != name => "rename",
            _ => "set",
        };
        items.insert(
            name.to_string(),
            ChangeItem {
                child: name.to_string(),
                action: action.into(),
                old_share: old,
                new_share: Some(share),
                new_name,
            },
        );
    }
    if total <= 0.0 {
        return Err(ServerError::invalid(
            "shares",
            "At least one child needs a share above 0.",
        ));
    }
    for (child_id, name, share) in &current {
        if !items.contains_key(name) {
            let active: i64 = sqlx::query_scalar(
                "select count(*) from workload w join budget_node b on b.budget_node_id = w.budget_node_id
                 where (b.budget_node_id = $1 or substr(b.path, 1, length($2)) = $2) and w.state in ('queued', 'running')",
            )
            .bind(child_id)
            .bind(format!("{prefix}{name}/"))
            .fetch_one(&mut *tx)
            .await?;
            let grandchildren = children(&mut tx, *child_id).await?.len();
            if active > 0 || grandchildren > 0 {
                return Err(ServerError::invalid(
                    "shares",
                    format!("\"{prefix}{name}\" cannot be removed: it has children or queued or running work."),
                ));
            }
            items.insert(
                name.clone(),
                ChangeItem {
                    child: name.clone(),
                    action: "remove".into(),
                    old_share: Some(*share),
                    new_share: None,
                    new_name: None,
                },
            );
        }
    }
    let id: i64 = sqlx::query_scalar(
        "insert into change_request (budget_node_id, proposer_id, justification, base_version, effective_at, state, created_at)
         values ($1, $2, $3, $4, $5, 'pending', $6) returning change_request_id",
    )
    .bind(node.budget_node_id)
    .bind(actor.id)
    .bind(proposal.justification.trim())
    .bind(node.children_version)
    .bind(proposal.effective_at)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    for item in items.values() {
        // Not a cached statement: sqlx's Any driver (0.8.6) sends a missing f64 as a float4
        // null, and PostgreSQL would then read a later share's 8 bytes as a float4.
        sqlx::query(
            "insert into change_request_item (change_request_id, child_name, action, old_share, new_share, new_name)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .persistent(false)
        .bind(id)
        .bind(&item.child)
        .bind(&item.action)
        .bind(item.old_share)
        .bind(item.new_share)
        .bind(&item.new_name)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    tracing::info!(request = id, node = %node.path, proposer = %actor.username, "change request proposed");
    get(pool, actor, id).await
}

#[derive(Debug, sqlx::FromRow)]
struct RequestRow {
    change_request_id: i64,
    budget_node_id: i64,
    path: String,
    proposer_id: i64,
    proposer: String,
    justification: String,
    base_version: i64,
    effective_at: Option<i64>,
    state: String,
    created_at: i64,
    decided_at: Option<i64>,
    decided_by: Option<String>,
    decision_comment: String,
    children_version: i64,
}

const SELECT: &str =
    "select r.change_request_id, r.budget_node_id, b.path, r.proposer_id, p.username as proposer,
        r.justification, r.base_version, r.effective_at, r.state, r.created_at, r.decided_at,
        d.username as decided_by, r.decision_comment, b.children_version
    from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
    join \"user\" p on p.user_id = r.proposer_id left join \"user\" d on d.user_id = r.decided_by";

async fn view(
    db: &mut AnyConnection,
    actor: &CurrentUser,
    row: RequestRow,
) -> Result<ChangeRequestView, ServerError> {
    let items: Vec<ChangeItem> = sqlx::query_as(
        "select child_name as child, action, old_share, new_share, new_name from change_request_item
         where change_request_id = $1 order by child_name",
    )
    .bind(row.change_request_id)
    .fetch_all(&mut *db)
    .await?;
    let can_decide = row.state == "pending"
        && may_decide(db, actor, &row.path, row.proposer_id)
            .await?
            .is_ok();
    let stale = row.state == "pending" && row.children_version != row.base_version;
    Ok(ChangeRequestView {
        id: row.change_request_id,
        node: row.path,
        proposer: row.proposer,
        justification: row.justification,
        base_version: row.base_version,
        effective_at: row.effective_at,
        state: if stale { "stale".into() } else { row.state },
        created_at: row.created_at,
        decided_at: row.decided_at,
        decided_by: row.decided_by,
        comment: row.decision_comment,
        items,
        can_decide: can_decide && !stale,
    })
}

pub async fn get(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut db = pool.acquire().await?;
    let row: RequestRow = sqlx::query_as(&format!("{SELECT} where r.change_request_id = $1"))
        .bind(id)
        .fetch_optional(&mut *db)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no change request {id}.")))?;
    view(&mut db, actor, row).await
}

/// Requests, newest first; `state` filters (`pending` includes stale ones, shown as stale);
/// `node` limits to one node's history.
pub async fn list(
    pool: &AnyPool,
    actor: &CurrentUser,
    state: Option<&str>,
    node: Option<&str>,
) -> Result<Vec<ChangeRequestView>, ServerError> {
    let mut db = pool.acquire().await?;
    let rows: Vec<RequestRow> =
        sqlx::query_as(&format!("{SELECT} where ($1 is null or r.state = $1) and ($2 is null or b.path = $2) order by r.change_request_id desc limit 200"))
            .bind(state)
            .bind(node)
            .fetch_all(&mut *db)
            .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(view(&mut db, actor, row).await?);
    }
    Ok(out)
}

/// Approves (`approve = true`) or rejects a pending request. Returns the new state:
/// `applied`, `scheduled` or `rejected`.
pub async fn decide(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    approve: bool,
    comment: &str,
) -> Result<ChangeRequestView, ServerError> {
    let now = now();
    let mut tx = crate::db::begin_write(pool).await?;
    let row: RequestRow = sqlx::query_as(&format!("{SELECT} where r.change_request_id = $1"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no change request {id}.")))?;
    if let Err(why) = may_decide(&mut tx, actor, &row.path, row.proposer_id).await? {
        return Err(ServerError::Forbidden(why));
    }
    if row.state != "pending" {
        return Err(ServerError::conflict(
            "state",
            format!("This request is already {}.", row.state),
        ));
    }
    let state = if !approve {
        "rejected"
    } else if row.children_version != row.base_version {
        sqlx::query("update change_request set state = 'stale' where change_request_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        return Err(ServerError::conflict(
            "base_version",
            "Another change to this node's shares was applied since this request was made: it is stale and must be rebased.",
        ));
    } else if row.effective_at.is_some_and(|at| at > now) {
        "scheduled"
    } else {
        apply(&mut tx, row.change_request_id, row.budget_node_id, now).await?;
        "applied"
    };
    sqlx::query(
        "update change_request set state = $2, decided_at = $3, decided_by = $4, decision_comment = $5,
                applied_at = case when $2 = 'applied' then $3 else null end
         where change_request_id = $1",
    )
    .bind(id)
    .bind(state)
    .bind(now)
    .bind(actor.id)
    .bind(comment.trim())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(request = id, node = %row.path, decider = %actor.username, state, "change request decided");
    get(pool, actor, id).await
}

/// Applies a request's items at `at` and bumps the node's children version.
async fn apply(
    db: &mut AnyConnection,
    request_id: i64,
    node_id: i64,
    at: i64,
) -> Result<(), ServerError> {
    let node_path: String =
        sqlx::query_scalar("select path from budget_node where budget_node_id = $1")
            .bind(node_id)
            .fetch_one(&mut *db)
            .await?;
    let prefix = if node_path.is_empty() {
        String::new()
    } else {
        format!("{node_path}/")
    };
    let items: Vec<(String, String, Option<f64>, Option<String>)> = sqlx::query_as(
        "select child_name, action, new_share, new_name from change_request_item where change_request_id = $1",
    )
    .bind(request_id)
    .fetch_all(&mut *db)
    .await?;
    for (name, action, share, new_name) in items {
        let path = format!("{prefix}{name}");
        let child: Option<i64> = sqlx::query_scalar(
            "select budget_node_id from budget_node where parent_id = $1 and name = $2 and removed_at is null",
        )
        .bind(node_id)
        .bind(&name)
        .fetch_optional(&mut *db)
        .await?;
        match (action.as_str(), child) {
            ("add", None) => {
                let id: i64 = sqlx::query_scalar(
                    "insert into budget_node (parent_id, name, path, created_at) values ($1, $2, $3, $4) returning budget_node_id",
                )
                .bind(node_id)
                .bind(&name)
                .bind(&path)
                .bind(at)
                .fetch_one(&mut *db)
                .await?;
                set_share(db, id, share.unwrap_or(0.0), at).await?;
            }
            ("remove", Some(id)) => {
                sqlx::query("update share_version set effective_to = $2 where budget_node_id = $1 and effective_to is null")
                    .bind(id)
                    .bind(at)
                    .execute(&mut *db)
                    .await?;
                sqlx::query("update budget_node set removed_at = $2 where budget_node_id = $1")
                    .bind(id)
                    .bind(at)
                    .execute(&mut *db)
                    .await?;
            }
            (_, Some(id)) => {
                if let Some(share) = share {
                    set_share(db, id, share, at).await?;
                }
                if let Some(new_name) = new_name.filter(|n| *n != name) {
                    let new_path = format!("{prefix}{new_name}");
                    sqlx::query(
                        "update budget_node set path = $2 || substr(path, length($1) + 1)
                         where path = $1 or substr(path, 1, length($1) + 1) = $1 || '/'",
                    )
                    .bind(&path)
                    .bind(&new_path)
                    .execute(&mut *db)
                    .await?;
                    sqlx::query("update budget_node set name = $2 where budget_node_id = $1")
                        .bind(id)
                        .bind(&new_name)
                        .execute(&mut *db)
                        .await?;
                }
            }
            _ => {
                return Err(ServerError::conflict(
                    "shares",
                    format!("\"{path}\" changed since the request was made; rebase it."),
                ));
            }
        }
    }
    sqlx::query(
        "update budget_node set children_version = children_version + 1 where budget_node_id = $1",
    )
    .bind(node_id)
    .execute(&mut *db)
    .await?;
    Ok(())
}

async fn set_share(
    db: &mut AnyConnection,
    node_id: i64,
    share: f64,
    at: i64,
) -> Result<(), ServerError> {
    sqlx::query("update share_version set effective_to = $2 where budget_node_id = $1 and effective_to is null")
        .bind(node_id)
        .bind(at)
        .execute(&mut *db)
        .await?;
    sqlx::query(
        "insert into share_version (budget_node_id, share, effective_from) values ($1, $2, $3)",
    )
    .bind(node_id)
    .bind(share)
    .bind(at)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Applies scheduled requests whose time has come (called by the runtime in its transaction);
/// one whose node changed meanwhile becomes stale instead. Returns how many were applied.
pub async fn apply_due(db: &mut AnyConnection, now: i64) -> Result<usize, ServerError> {
    let due: Vec<(i64, i64, i64, i64, i64)> = sqlx::query_as(
        "select r.change_request_id, r.budget_node_id, r.base_version, b.children_version, r.effective_at
         from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
         where r.state = 'scheduled' and r.effective_at <= $1 order by r.effective_at, r.change_request_id",
    )
    .bind(now)
    .fetch_all(&mut *db)
    .await?;
    let mut applied = 0;
    for (id, node_id, base, current, at) in due {
        if base != current {
            sqlx::query("update change_request set state = 'stale' where change_request_id = $1")
                .bind(id)
                .execute(&mut *db)
                .await?;
            continue;
        }
        apply(db, id, node_id, at).await?;
        sqlx::query("update change_request set state = 'applied', applied_at = $2 where change_request_id = $1")
            .bind(id)
            .bind(at)
            .execute(&mut *db)
            .await?;
        applied += 1;
    }
    Ok(applied)
}
