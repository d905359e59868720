//! Change requests as operations: propose, read, decide, apply when due. Authorization and
//! validation come from `policy`, every query from `repo`.

use super::{
    policy::{self, Owners, Proposal},
    repo::{self, RequestRow},
};
use crate::ServerError;
use app::{
    budget::{ChangeItem, ChangeRequestView, ChangeState},
    model::CurrentUser,
};
use sqlx::{AnyConnection, AnyPool};

pub async fn propose(
    pool: &AnyPool,
    actor: &CurrentUser,
    proposal: Proposal,
    now: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let node = repo::node_by_path(&mut *tx, &proposal.node)
        .await?
        .ok_or_else(|| {
            ServerError::invalid(
                "node",
                format!("There is no node \"{}\" in the budget tree.", proposal.node),
            )
        })?;
    ensure_may_propose(&mut tx, actor, &node.path).await?;
    let id = record(&mut tx, actor, &node, &proposal, now).await?;
    tx.commit().await?;
    tracing::info!(request = id, node = %node.path, proposer = %actor.username, "change request proposed");
    get(pool, actor, id).await
}

/// Refuses someone who is not in `path`'s subtree (a member or owner in it, or an owner above).
async fn ensure_may_propose(
    tx: &mut AnyConnection,
    actor: &CurrentUser,
    path: &str,
) -> Result<(), ServerError> {
    let owners = repo::owners(&mut *tx).await?;
    let member_paths = repo::member_paths(&mut *tx, actor.id).await?;
    if !policy::may_propose(&owners, &member_paths, actor, path) {
        return Err(ServerError::Forbidden(format!(
            "Only people in \"{path}\"'s subtree (its members and owners) can propose changes to it."
        )));
    }
    Ok(())
}

/// Checks `proposal` against the node's children now and records it as a pending request.
async fn record(
    tx: &mut AnyConnection,
    actor: &CurrentUser,
    node: &repo::NodeRow,
    proposal: &Proposal,
    now: i64,
) -> Result<i64, ServerError> {
    let cluster = match proposal.cluster.as_deref().map(str::trim) {
        Some(name) => Some(
            crate::clusters::repo::find_by_name(&mut *tx, name)
                .await?
                .ok_or_else(|| {
                    ServerError::invalid("cluster", format!("There is no cluster \"{name}\"."))
                })?,
        ),
        None => None,
    };
    let mut current = repo::children(&mut *tx, node.budget_node_id).await?;
    if let Some(cluster) = &cluster {
        // The shares in force on that cluster: its overrides where it has any.
        let overrides = repo::overrides_in_force(&mut *tx, cluster.cluster_id).await?;
        for child in &mut current {
            if let Some(&share) = overrides.get(&child.id) {
                child.share = share;
            }
        }
    }
    let plan = policy::plan(proposal, &node.path, &current, now)?;
    if let Some(cluster) = &cluster {
        policy::check_cluster_plan(&plan, &cluster.name)?;
    }
    for (child_id, name) in &plan.removed {
        let path = if node.path.is_empty() {
            name.clone()
        } else {
            format!("{}/{name}", node.path)
        };
        if repo::holds_anything(&mut *tx, *child_id, &path).await? {
            return Err(ServerError::invalid(
                "shares",
                format!("\"{path}\" cannot be removed: it has children or queued or running work."),
            ));
        }
    }
    let request = repo::NewRequest {
        node,
        proposer_id: actor.id,
        justification: proposal.justification.trim(),
        effective_at: proposal.effective_at,
        cluster_id: cluster.map(|c| c.cluster_id),
    };
    Ok(repo::insert_request(&mut *tx, &request, plan.items.values(), now).await?)
}

/// Request `id`, if `actor` may take it back (see [`policy::may_withdraw`]).
async fn withdrawable(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    actor: &CurrentUser,
    id: i64,
) -> Result<repo::RequestRow, ServerError> {
    let row = repo::request(&mut **tx, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no change request {id}.")))?;
    policy::may_withdraw(actor, row.proposer_id, row.state)
        .map_err(|why| refusal(actor, &row, why))?;
    Ok(row)
}

/// The proposer takes a waiting request back; it ends `withdrawn` and no one can decide it.
pub async fn withdraw(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    now: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let row = withdrawable(&mut tx, actor, id).await?;
    repo::mark_withdrawn(&mut *tx, id, actor.id, None, now).await?;
    tx.commit().await?;
    tracing::info!(request = id, node = %row.path, proposer = %actor.username, "change request withdrawn");
    get(pool, actor, id).await
}

/// The proposer of a stale request proposes it again on today's shares (see
/// [`policy::rebased`]): a new pending request with the same justification, and the old one
/// withdrawn in its favour. Returns the new request.
pub async fn rebase(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    now: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let row = withdrawable(&mut tx, actor, id).await?;
    if policy::shown_state(row.state, row.base_version, row.children_version) != ChangeState::Stale
    {
        return Err(ServerError::conflict(
            "state",
            "This request is not stale: it already applies to today's shares and can be decided as it is.",
        ));
    }
    let node = repo::node_by_path(&mut *tx, &row.path)
        .await?
        .ok_or_else(|| {
            ServerError::NotFound(format!("The node \"{}\" no longer exists.", row.path))
        })?;
    let items = repo::items_of(&mut *tx, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default();
    let current = repo::children(&mut *tx, node.budget_node_id).await?;
    let mut proposal = policy::rebased(
        &row.path,
        &items,
        &current,
        &row.justification,
        row.effective_at,
        now,
    );
    proposal.cluster = row.cluster.clone();
    // A rebase is a new proposal: its proposer must still be in the subtree.
    ensure_may_propose(&mut tx, actor, &node.path).await?;
    let new_id = record(&mut tx, actor, &node, &proposal, now).await?;
    repo::mark_withdrawn(&mut *tx, id, actor.id, Some(new_id), now).await?;
    tx.commit().await?;
    tracing::info!(request = id, rebased_as = new_id, node = %row.path, proposer = %actor.username, "change request rebased");
    get(pool, actor, new_id).await
}

/// Someone else's request is forbidden to them; the proposer's own finished one is a conflict.
fn refusal(actor: &CurrentUser, row: &RequestRow, why: String) -> ServerError {
    if actor.id == row.proposer_id {
        ServerError::conflict("state", why)
    } else {
        ServerError::Forbidden(why)
    }
}

/// A request as `actor` sees it (whether they may decide it, whether it went stale).
fn view(
    owners: &Owners,
    actor: &CurrentUser,
    row: RequestRow,
    items: Vec<ChangeItem>,
) -> ChangeRequestView {
    let state = policy::shown_state(row.state, row.base_version, row.children_version);
    let can_decide = state == ChangeState::Pending
        && policy::may_decide(owners, actor, &row.path, row.proposer_id).is_ok();
    let waits = policy::may_withdraw(actor, row.proposer_id, row.state).is_ok();
    ChangeRequestView {
        id: row.change_request_id,
        node: row.path,
        proposer: row.proposer,
        justification: row.justification,
        base_version: row.base_version,
        effective_at: row.effective_at,
        state,
        created_at: row.created_at,
        decided_at: row.decided_at,
        decided_by: row.decided_by,
        comment: row.decision_comment,
        items,
        can_decide,
        can_withdraw: waits,
        can_rebase: waits && state == ChangeState::Stale,
        replaced_by: row.replaced_by,
        cluster: row.cluster,
    }
}

async fn views(
    db: &mut AnyConnection,
    actor: &CurrentUser,
    rows: Vec<RequestRow>,
) -> Result<Vec<ChangeRequestView>, ServerError> {
    let owners = repo::owners(&mut *db).await?;
    let ids: Vec<i64> = rows.iter().map(|r| r.change_request_id).collect();
    let mut items = repo::items_of(&mut *db, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let mine = items.remove(&row.change_request_id).unwrap_or_default();
            view(&owners, actor, row, mine)
        })
        .collect())
}

pub async fn get(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut db = pool.acquire().await?;
    let row = repo::request(&mut *db, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no change request {id}.")))?;
    let mut one = views(&mut db, actor, vec![row]).await?;
    Ok(one.remove(0))
}

/// Requests, newest first; `state` filters by the stored state (`pending` includes stale ones,
/// shown as stale); `node` limits to one node's history.
pub async fn list(
    pool: &AnyPool,
    actor: &CurrentUser,
    state: Option<ChangeState>,
    node: Option<&str>,
) -> Result<Vec<ChangeRequestView>, ServerError> {
    let mut db = pool.acquire().await?;
    let rows = repo::requests(&mut *db, state, node).await?;
    views(&mut db, actor, rows).await
}

/// Approves (`approve = true`) or rejects a pending request: it ends `applied`, `scheduled` or
/// `rejected`.
pub async fn decide(
    pool: &AnyPool,
    actor: &CurrentUser,
    id: i64,
    approve: bool,
    comment: &str,
    now: i64,
) -> Result<ChangeRequestView, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let row = repo::request(&mut *tx, id)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no change request {id}.")))?;
    let owners = repo::owners(&mut *tx).await?;
    policy::may_decide(&owners, actor, &row.path, row.proposer_id)
        .map_err(ServerError::Forbidden)?;
    if row.state != ChangeState::Pending {
        return Err(ServerError::conflict(
            "state",
            format!("This request is already {}.", row.state),
        ));
    }
    let state = if !approve {
        ChangeState::Rejected
    } else if row.children_version != row.base_version {
        repo::mark_stale(&mut *tx, id).await?;
        tx.commit().await?;
        return Err(ServerError::conflict(
            "base_version",
            "Another change to this node's shares was applied since this request was made: it is stale and must be rebased.",
        ));
    } else if row.effective_at.is_some_and(|at| at > now) {
        ChangeState::Scheduled
    } else {
        repo::apply(&mut tx, row.change_request_id, row.budget_node_id, now).await?;
        ChangeState::Applied
    };
    repo::record_decision(&mut *tx, id, state, actor.id, comment.trim(), now).await?;
    tx.commit().await?;
    tracing::info!(request = id, node = %row.path, decider = %actor.username, state = %state, "change request decided");
    get(pool, actor, id).await
}

/// Applies scheduled requests whose time has come (called by the runtime in its transaction);
/// one whose node changed meanwhile becomes stale instead. Returns how many were applied.
pub async fn apply_due(db: &mut AnyConnection, now: i64) -> Result<usize, ServerError> {
    let mut applied = 0;
    for due in repo::due(&mut *db, now).await? {
        if due.base_version != due.children_version {
            repo::mark_stale(&mut *db, due.change_request_id).await?;
            continue;
        }
        repo::apply(
            db,
            due.change_request_id,
            due.budget_node_id,
            due.effective_at,
        )
        .await?;
        repo::mark_applied(&mut *db, due.change_request_id, due.effective_at).await?;
        applied += 1;
    }
    Ok(applied)
}
