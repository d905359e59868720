//! SQL for change requests: the requests, their items, the ownership they are judged by, and
//! applying them to the tree.

use super::policy::{Child, Owners};
use crate::{
    budget::repo::{set_share, ShareOrigin},
    ServerError,
};
use app::budget::{ChangeAction, ChangeItem, ChangeState};
use sqlx::{AnyConnection, AnyExecutor, FromRow};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, FromRow)]
pub struct NodeRow {
    pub budget_node_id: i64,
    pub path: String,
    pub children_version: i64,
}

pub async fn node_by_path(
    db: impl AnyExecutor<'_>,
    path: &str,
) -> Result<Option<NodeRow>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, path, children_version from budget_node where path = $1 and removed_at is null",
    )
    .bind(path.trim().trim_matches('/'))
    .fetch_optional(db)
    .await
}

/// The node's live children with their shares in force, by name.
pub async fn children(db: impl AnyExecutor<'_>, node_id: i64) -> Result<Vec<Child>, sqlx::Error> {
    let rows: Vec<(i64, String, f64)> = sqlx::query_as(
        "select b.budget_node_id, b.name, coalesce(s.share, 0.0) from budget_node b
         left join share_version s on s.budget_node_id = b.budget_node_id and s.effective_to is null
         where b.parent_id = $1 and b.removed_at is null order by b.name",
    )
    .bind(node_id)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, name, share)| Child { id, name, share })
        .collect())
}

/// The shares overridden on `cluster_id` now, by node id.
pub async fn overrides_in_force(
    db: impl AnyExecutor<'_>,
    cluster_id: i64,
) -> Result<std::collections::BTreeMap<i64, f64>, sqlx::Error> {
    let rows: Vec<(i64, f64)> = sqlx::query_as(
        "select budget_node_id, share from share_override where cluster_id = $1 and effective_to is null",
    )
    .bind(cluster_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Every owner grant on a node still in the tree, by node path: one query, however many requests
/// are judged with it.
pub async fn owners(db: impl AnyExecutor<'_>) -> Result<Owners, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "select b.path, o.user_id from budget_owner o join budget_node b on b.budget_node_id = o.budget_node_id
         where b.removed_at is null",
    )
    .fetch_all(db)
    .await?;
    let mut owners: HashMap<String, Vec<i64>> = HashMap::new();
    for (path, user) in rows {
        owners.entry(path).or_default().push(user);
    }
    Ok(Owners(owners))
}

/// Paths of the nodes still in the tree the user is a member of (a removed project's members
/// are no longer in its parent's subtree).
pub async fn member_paths(
    db: impl AnyExecutor<'_>,
    user_id: i64,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "select b.path from budget_member m join budget_node b on b.budget_node_id = m.budget_node_id
         where m.user_id = $1 and b.removed_at is null",
    )
    .bind(user_id)
    .fetch_all(db)
    .await
}

/// Whether a child can be removed: nothing below it and no queued or running work in it.
pub async fn holds_anything(
    db: &mut AnyConnection,
    child_id: i64,
    child_path: &str,
) -> Result<bool, sqlx::Error> {
    let active: i64 = sqlx::query_scalar(
        "select count(*) from workload w join budget_node b on b.budget_node_id = w.budget_node_id
         where (b.budget_node_id = $1 or substr(b.path, 1, length($2)) = $2) and w.state in ('queued', 'running')",
    )
    .bind(child_id)
    .bind(format!("{child_path}/"))
    .fetch_one(&mut *db)
    .await?;
    let grandchildren = children(&mut *db, child_id).await?.len();
    Ok(active > 0 || grandchildren > 0)
}

/// What a new request says besides its items.
pub struct NewRequest<'a> {
    pub node: &'a NodeRow,
    pub proposer_id: i64,
    pub justification: &'a str,
    pub effective_at: Option<i64>,
    /// The cluster it is for; none: every cluster.
    pub cluster_id: Option<i64>,
}

/// Records a pending request and its items; returns its id.
pub async fn insert_request(
    db: &mut AnyConnection,
    request: &NewRequest<'_>,
    items: impl Iterator<Item = &ChangeItem>,
    now: i64,
) -> Result<i64, sqlx::Error> {
    let NewRequest {
        node,
        proposer_id,
        justification,
        effective_at,
        cluster_id,
    } = *request;
    let id: i64 = sqlx::query_scalar(
        "insert into change_request (budget_node_id, proposer_id, justification, base_version, effective_at, state,
                                     created_at, cluster_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8) returning change_request_id",
    )
    .bind(node.budget_node_id)
    .bind(proposer_id)
    .bind(justification)
    .bind(node.children_version)
    .bind(effective_at)
    .bind(ChangeState::Pending.as_str())
    .bind(now)
    .bind(cluster_id)
    .fetch_one(&mut *db)
    .await?;
    for item in items {
        // Not a cached statement: sqlx's Any driver (0.8.6) sends a missing f64 as a float4
        // null, and PostgreSQL would then read a later share's 8 bytes as a float4.
        sqlx::query(
            "insert into change_request_item (change_request_id, child_name, action, old_share, new_share, new_name)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .persistent(false)
        .bind(id)
        .bind(&item.child)
        .bind(item.action.as_str())
        .bind(item.old_share)
        .bind(item.new_share)
        .bind(&item.new_name)
        .execute(&mut *db)
        .await?;
    }
    Ok(id)
}

#[derive(Debug, FromRow)]
pub struct RequestRow {
    pub change_request_id: i64,
    pub budget_node_id: i64,
    pub path: String,
    pub proposer_id: i64,
    pub proposer: String,
    pub justification: String,
    pub base_version: i64,
    pub effective_at: Option<i64>,
    #[sqlx(try_from = "String")]
    pub state: ChangeState,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub decided_by: Option<String>,
    pub decision_comment: String,
    pub children_version: i64,
    pub replaced_by: Option<i64>,
    /// The cluster it is for; none: every cluster.
    pub cluster: Option<String>,
}

const SELECT: &str =
    "select r.change_request_id, r.budget_node_id, b.path, r.proposer_id, p.username as proposer,
        r.justification, r.base_version, r.effective_at, r.state, r.created_at, r.decided_at,
        d.username as decided_by, r.decision_comment, b.children_version, r.replaced_by,
        c.name as cluster
    from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
    join \"user\" p on p.user_id = r.proposer_id left join \"user\" d on d.user_id = r.decided_by
    left join cluster c on c.cluster_id = r.cluster_id";

pub async fn request(db: impl AnyExecutor<'_>, id: i64) -> Result<Option<RequestRow>, sqlx::Error> {
    sqlx::query_as(&format!("{SELECT} where r.change_request_id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await
}

/// The newest 200 requests, optionally in one stored state and/or of one node.
pub async fn requests(
    db: impl AnyExecutor<'_>,
    state: Option<ChangeState>,
    node: Option<&str>,
) -> Result<Vec<RequestRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "{SELECT} where ($1 is null or r.state = $1) and ($2 is null or b.path = $2)
         order by r.change_request_id desc limit 200"
    ))
    .bind(state.map(ChangeState::as_str))
    .bind(node)
    .fetch_all(db)
    .await
}

/// The items of these requests, by request, in child-name order: one query for the lot.
pub async fn items_of(
    db: impl AnyExecutor<'_>,
    ids: &[i64],
) -> Result<BTreeMap<i64, Vec<ChangeItem>>, sqlx::Error> {
    let mut by_request: BTreeMap<i64, Vec<ChangeItem>> = BTreeMap::new();
    if ids.is_empty() {
        return Ok(by_request);
    }
    let list = crate::db::id_list(ids);
    #[derive(FromRow)]
    struct Row {
        change_request_id: i64,
        #[sqlx(flatten)]
        item: ChangeItem,
    }
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "select change_request_id, child_name as child, action, old_share, new_share, new_name
         from change_request_item where change_request_id in ({list}) order by child_name"
    ))
    .fetch_all(db)
    .await?;
    for row in rows {
        by_request
            .entry(row.change_request_id)
            .or_default()
            .push(row.item);
    }
    Ok(by_request)
}

/// Records a decision: the new state, who, when, and why.
pub async fn record_decision(
    db: impl AnyExecutor<'_>,
    id: i64,
    state: ChangeState,
    decider: i64,
    comment: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update change_request set state = $2, decided_at = $3, decided_by = $4, decision_comment = $5,
                applied_at = case when $2 = 'applied' then $3 else null end
         where change_request_id = $1",
    )
    .bind(id)
    .bind(state.as_str())
    .bind(now)
    .bind(decider)
    .bind(comment)
    .execute(db)
    .await?;
    Ok(())
}

/// Its proposer took it back at `now`; `replaced_by` when it was rebased into a new request.
pub async fn mark_withdrawn(
    db: impl AnyExecutor<'_>,
    id: i64,
    proposer: i64,
    replaced_by: Option<i64>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update change_request set state = $2, decided_at = $3, decided_by = $4, replaced_by = $5
         where change_request_id = $1",
    )
    .bind(id)
    .bind(ChangeState::Withdrawn.as_str())
    .bind(now)
    .bind(proposer)
    .bind(replaced_by)
    .execute(db)
    .await?;
    Ok(())
}

pub async fn mark_stale(db: impl AnyExecutor<'_>, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("update change_request set state = $2 where change_request_id = $1")
        .bind(id)
        .bind(ChangeState::Stale.as_str())
        .execute(db)
        .await?;
    Ok(())
}

pub async fn mark_applied(db: impl AnyExecutor<'_>, id: i64, at: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update change_request set state = $3, applied_at = $2 where change_request_id = $1",
    )
    .bind(id)
    .bind(at)
    .bind(ChangeState::Applied.as_str())
    .execute(db)
    .await?;
    Ok(())
}

/// A scheduled request whose time has come.
#[derive(Debug, FromRow)]
pub struct DueRow {
    pub change_request_id: i64,
    pub budget_node_id: i64,
    pub base_version: i64,
    pub children_version: i64,
    pub effective_at: i64,
}

pub async fn due(db: impl AnyExecutor<'_>, now: i64) -> Result<Vec<DueRow>, sqlx::Error> {
    sqlx::query_as(
        "select r.change_request_id, r.budget_node_id, r.base_version, b.children_version, r.effective_at
         from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
         where r.state = $2 and r.effective_at <= $1 order by r.effective_at, r.change_request_id",
    )
    .bind(now)
    .bind(ChangeState::Scheduled.as_str())
    .fetch_all(db)
    .await
}

/// Applies a request's items at `at` and bumps the node's children version.
pub async fn apply(
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
    let items: Vec<ChangeItem> = sqlx::query_as(
        "select child_name as child, action, old_share, new_share, new_name
         from change_request_item where change_request_id = $1",
    )
    .bind(request_id)
    .fetch_all(&mut *db)
    .await?;
    let cluster: Option<i64> =
        sqlx::query_scalar("select cluster_id from change_request where change_request_id = $1")
            .bind(request_id)
            .fetch_one(&mut *db)
            .await?;
    for item in items {
        let name = item.child;
        let path = format!("{prefix}{name}");
        let child: Option<i64> = sqlx::query_scalar(
            "select budget_node_id from budget_node where parent_id = $1 and name = $2 and removed_at is null",
        )
        .bind(node_id)
        .bind(&name)
        .fetch_optional(&mut *db)
        .await?;
        match (item.action, child) {
            // A change for one cluster: its shares there, over the tree's.
            (ChangeAction::Set, Some(id)) if cluster.is_some() => {
                if let (Some(cluster), Some(share)) = (cluster, item.new_share) {
                    crate::budget::repo::set_override(db, id, cluster, share, at, request_id)
                        .await?;
                }
            }
            (ChangeAction::Add, None) => {
                let id = crate::budget::repo::insert_budget_node(
                    &mut *db,
                    Some(node_id),
                    &name,
                    &path,
                    at,
                )
                .await?;
                set_share(
                    db,
                    id,
                    item.new_share.unwrap_or(0.0),
                    at,
                    ShareOrigin::Request(request_id),
                )
                .await?;
            }
            (ChangeAction::Remove, Some(id)) => {
                crate::budget::repo::end_overrides(db, id, at).await?;
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
                if let Some(share) = item.new_share {
                    set_share(db, id, share, at, ShareOrigin::Request(request_id)).await?;
                    // A change for every cluster sets the share everywhere.
                    crate::budget::repo::end_overrides(db, id, at).await?;
                }
                if let Some(new_name) = item.new_name.filter(|n| *n != name) {
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
