//! SQL for the budget tree.

use sqlx::{Any, AnyConnection, AnyExecutor, FromRow, Transaction};

#[derive(Debug, Clone, FromRow)]
pub struct BudgetNodeRow {
    pub budget_node_id: i64,
    pub parent_id: Option<i64>,
    pub name: String,
    pub path: String,
}

#[derive(Debug, Clone, FromRow)]
pub struct ShareVersionRow {
    pub budget_node_id: i64,
    pub share: f64,
    pub effective_from: i64,
    pub effective_to: Option<i64>,
}

/// Live nodes (not removed), parents before children.
pub async fn budget_nodes(pool: impl AnyExecutor<'_>) -> Result<Vec<BudgetNodeRow>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, parent_id, name, path from budget_node
         where removed_at is null order by length(path) - length(replace(path, '/', '')), path",
    )
    .fetch_all(pool)
    .await
}

/// Every share version, in time order.
pub async fn share_versions(
    pool: impl AnyExecutor<'_>,
) -> Result<Vec<ShareVersionRow>, sqlx::Error> {
    sqlx::query_as(
        "select budget_node_id, share, effective_from, effective_to from share_version
         order by effective_from, budget_node_id",
    )
    .fetch_all(pool)
    .await
}

/// A node's share on one cluster, over a span of time.
#[derive(Debug, Clone, FromRow)]
pub struct ShareOverrideRow {
    pub cluster_id: i64,
    pub budget_node_id: i64,
    pub share: f64,
    pub effective_from: i64,
    pub effective_to: Option<i64>,
}

impl ShareOverrideRow {
    /// As a share version of its node (on its cluster).
    pub fn version(&self) -> ShareVersionRow {
        ShareVersionRow {
            budget_node_id: self.budget_node_id,
            share: self.share,
            effective_from: self.effective_from,
            effective_to: self.effective_to,
        }
    }
}

/// Every per-cluster share override, in time order.
pub async fn share_overrides(
    db: impl AnyExecutor<'_>,
) -> Result<Vec<ShareOverrideRow>, sqlx::Error> {
    sqlx::query_as(
        "select cluster_id, budget_node_id, share, effective_from, effective_to from share_override
         order by effective_from, budget_node_id",
    )
    .fetch_all(db)
    .await
}

/// Sets `node_id`'s share on `cluster_id` from `at` on (closing the override in force there).
pub async fn set_override(
    db: &mut AnyConnection,
    node_id: i64,
    cluster_id: i64,
    share: f64,
    at: i64,
    request_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update share_override set effective_to = $3
         where budget_node_id = $1 and cluster_id = $2 and effective_to is null",
    )
    .bind(node_id)
    .bind(cluster_id)
    .bind(at)
    .execute(&mut *db)
    .await?;
    sqlx::query(
        "insert into share_override (budget_node_id, cluster_id, share, effective_from, change_request_id)
         values ($1, $2, $3, $4, $5)",
    )
    .bind(node_id)
    .bind(cluster_id)
    .bind(share)
    .bind(at)
    .bind(request_id)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Ends every override of `node_id` at `at`: its share applies on every cluster again.
pub async fn end_overrides(
    db: &mut AnyConnection,
    node_id: i64,
    at: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update share_override set effective_to = $2 where budget_node_id = $1 and effective_to is null",
    )
    .bind(node_id)
    .bind(at)
    .execute(&mut *db)
    .await?;
    Ok(())
}

pub async fn find_node_by_path(
    tx: &mut Transaction<'_, Any>,
    path: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "select budget_node_id from budget_node where path = $1 and removed_at is null",
    )
    .bind(path)
    .fetch_optional(&mut **tx)
    .await
}

pub async fn insert_budget_node(
    db: impl AnyExecutor<'_>,
    parent_id: Option<i64>,
    name: &str,
    path: &str,
    now: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "insert into budget_node (parent_id, name, path, created_at) values ($1, $2, $3, $4)
         returning budget_node_id",
    )
    .bind(parent_id)
    .bind(name)
    .bind(path)
    .bind(now)
    .fetch_one(db)
    .await
}

/// The share in force now, if any.
pub async fn current_share(
    tx: &mut Transaction<'_, Any>,
    node_id: i64,
) -> Result<Option<f64>, sqlx::Error> {
    sqlx::query_scalar(
        "select share from share_version where budget_node_id = $1 and effective_to is null",
    )
    .bind(node_id)
    .fetch_optional(&mut **tx)
    .await
}

/// Closes the version in force and opens a new one at `at`.
/// Where a share version came from (the Budget tree's share history says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareOrigin {
    /// The node was created with it.
    Created,
    /// An approved change request set it.
    Request(i64),
    /// An admin imported the tree file.
    Import,
}

impl ShareOrigin {
    fn source(self) -> &'static str {
        match self {
            ShareOrigin::Created => "created",
            ShareOrigin::Request(_) => "request",
            ShareOrigin::Import => "import",
        }
    }

    fn request(self) -> Option<i64> {
        match self {
            ShareOrigin::Request(id) => Some(id),
            _ => None,
        }
    }
}

pub async fn set_share(
    db: &mut AnyConnection,
    node_id: i64,
    share: f64,
    at: i64,
    origin: ShareOrigin,
) -> Result<(), sqlx::Error> {
    sqlx::query("update share_version set effective_to = $2 where budget_node_id = $1 and effective_to is null")
        .bind(node_id)
        .bind(at)
        .execute(&mut *db)
        .await?;
    sqlx::query(
        "insert into share_version (budget_node_id, share, effective_from, source, change_request_id)
         values ($1, $2, $3, $4, $5)",
    )
    .bind(node_id)
    .bind(share)
    .bind(at)
    .bind(origin.source())
    .bind(origin.request())
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Makes `user_ids` the node's grants of this kind; returns `(added, removed)`.
pub async fn replace_grants(
    tx: &mut Transaction<'_, Any>,
    table: Grant,
    node_id: i64,
    user_ids: &[i64],
) -> Result<(Vec<i64>, Vec<i64>), sqlx::Error> {
    let table = table.table();
    let before: Vec<i64> = sqlx::query_scalar(&format!(
        "select user_id from {table} where budget_node_id = $1"
    ))
    .bind(node_id)
    .fetch_all(&mut **tx)
    .await?;
    let added = user_ids
        .iter()
        .filter(|u| !before.contains(u))
        .copied()
        .collect();
    let removed = before
        .iter()
        .filter(|u| !user_ids.contains(u))
        .copied()
        .collect();
    sqlx::query(&format!("delete from {table} where budget_node_id = $1"))
        .bind(node_id)
        .execute(&mut **tx)
        .await?;
    for user_id in user_ids {
        sqlx::query(&format!(
            "insert into {table} (budget_node_id, user_id) values ($1, $2)"
        ))
        .bind(node_id)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok((added, removed))
}

/// Which grant table: owners decide on a node's children; members charge work to a leaf.
#[derive(Debug, Clone, Copy)]
pub enum Grant {
    Owner,
    Member,
}

impl Grant {
    pub fn table(self) -> &'static str {
        match self {
            Grant::Owner => "budget_owner",
            Grant::Member => "budget_member",
        }
    }
}

/// `(path, username)` of every grant of this kind.
pub async fn grants(
    db: impl AnyExecutor<'_>,
    grant: Grant,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select b.path, u.username from {} g
         join budget_node b on b.budget_node_id = g.budget_node_id
         join \"user\" u on u.user_id = g.user_id
         order by b.path, u.username",
        grant.table()
    ))
    .fetch_all(db)
    .await
}

/// Leaves the user may charge work to, as `(budget_node_id, path)`.
pub async fn member_leaves(
    db: impl AnyExecutor<'_>,
    user_id: i64,
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    sqlx::query_as(
        "select b.budget_node_id, b.path from budget_member m
         join budget_node b on b.budget_node_id = m.budget_node_id
         where m.user_id = $1 and b.removed_at is null order by b.path",
    )
    .bind(user_id)
    .fetch_all(db)
    .await
}

/// Each live node's children version (bumped by every applied change to its children), by path.
pub async fn children_versions(
    db: impl AnyExecutor<'_>,
) -> Result<std::collections::BTreeMap<String, i64>, sqlx::Error> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select path, children_version from budget_node where removed_at is null")
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}

/// Every live node's share in force, by path (the root left out).
pub async fn shares_in_force(
    db: impl AnyExecutor<'_>,
) -> Result<std::collections::BTreeMap<String, f64>, sqlx::Error> {
    let rows: Vec<(String, f64)> = sqlx::query_as(
        "select b.path, s.share from budget_node b join share_version s on s.budget_node_id = b.budget_node_id
         where b.removed_at is null and s.effective_to is null and b.path != ''",
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Every live node's share in force at `at` on the tree itself (no cluster's override), by path.
pub async fn tree_shares_at(
    db: impl AnyExecutor<'_>,
    at: i64,
) -> Result<std::collections::BTreeMap<String, f64>, sqlx::Error> {
    let rows: Vec<(String, f64)> = sqlx::query_as(
        "select b.path, s.share from budget_node b join share_version s on s.budget_node_id = b.budget_node_id
         where b.removed_at is null and b.path != '' and s.effective_from <= $1
           and (s.effective_to is null or s.effective_to > $1)",
    )
    .bind(at)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// The shares an approved change for `cluster_id` alone sets there, by path.
pub async fn overrides_in_force_by_path(
    db: impl AnyExecutor<'_>,
    cluster_id: i64,
) -> Result<std::collections::BTreeMap<String, f64>, sqlx::Error> {
    let rows: Vec<(String, f64)> = sqlx::query_as(
        "select b.path, o.share from share_override o join budget_node b on b.budget_node_id = o.budget_node_id
         where o.cluster_id = $1 and o.effective_to is null and b.removed_at is null",
    )
    .bind(cluster_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// A workload as the what-if replays it.
#[derive(Debug, Clone, FromRow)]
pub struct Submission {
    pub workload_id: i64,
    pub project: String,
    pub owner: String,
    pub gpus: i64,
    pub min_runtime_s: i64,
    #[sqlx(try_from = "crate::db::Flag")]
    pub resumable: bool,
    pub priority: i64,
    #[sqlx(try_from = "String")]
    pub state: app::workloads::WorkloadState,
    pub submitted_at: i64,
    pub started_at: Option<i64>,
    pub progress_s: i64,
    pub cluster_id: i64,
}

/// Every workload submitted from `since` on, in submission order.
pub async fn submissions_since(
    db: impl AnyExecutor<'_>,
    since: i64,
) -> Result<Vec<Submission>, sqlx::Error> {
    sqlx::query_as(
        "select w.workload_id, b.path as project, u.username as owner, w.gpus, w.min_runtime_s, w.resumable, w.priority,
                w.state, w.submitted_at, w.started_at, w.progress_s, w.cluster_id
         from workload w join budget_node b on b.budget_node_id = w.budget_node_id join \"user\" u on u.user_id = w.user_id
         where w.submitted_at >= $1 order by w.submitted_at, w.workload_id",
    )
    .bind(since)
    .fetch_all(db)
    .await
}

/// The account with this username, whatever its case.
pub async fn user_id_by_name(
    db: impl AnyExecutor<'_>,
    username: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("select user_id from \"user\" where lower(username) = lower($1)")
        .bind(username)
        .fetch_optional(db)
        .await
}
