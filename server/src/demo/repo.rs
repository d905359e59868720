//! SQL the demo needs of its own: who is there, its marker, and the history it backfills.

use sqlx::AnyExecutor;
use std::collections::BTreeMap;

pub async fn usernames(db: impl AnyExecutor<'_>) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("select username from \"user\"")
        .fetch_all(db)
        .await
}

/// Records that this database is a demo one.
pub async fn mark(db: impl AnyExecutor<'_>, marker: &str, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query("insert into setting (key, value, updated_at) values ($1, 'true', $2)")
        .bind(marker)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// Live budget nodes' ids by path.
pub async fn live_node_ids(db: impl AnyExecutor<'_>) -> Result<BTreeMap<String, i64>, sqlx::Error> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select path, budget_node_id from budget_node where removed_at is null")
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}

/// An hour of healthy capacity, unless one is already there.
pub async fn insert_capacity(
    db: impl AnyExecutor<'_>,
    cluster: i64,
    hour: i64,
    gpu_s: f64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into capacity_hour (cluster_id, hour, healthy_gpu_s) values ($1, $2, $3)
         on conflict do nothing",
    )
    .bind(cluster)
    .bind(hour)
    .bind(gpu_s)
    .execute(db)
    .await?;
    Ok(())
}

/// A leaf's hour of usage: `[charged, unallocated, demand, owed, sampled, utilized]`
/// GPU-seconds, unless there.
pub async fn insert_usage(
    db: impl AnyExecutor<'_>,
    leaf: i64,
    cluster: i64,
    hour: i64,
    [charged, free, demand, owed, sampled, utilized]: [f64; 6],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into usage_hour (budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s,
                                 sampled_gpu_s, utilized_gpu_s, cluster_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict do nothing",
    )
    .bind(leaf)
    .bind(hour)
    .bind(charged)
    .bind(free)
    .bind(demand)
    .bind(owed)
    .bind(sampled)
    .bind(utilized)
    .bind(cluster)
    .execute(db)
    .await?;
    Ok(())
}

/// Every account's id by username.
pub async fn user_ids(db: impl AnyExecutor<'_>) -> Result<BTreeMap<String, i64>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as("select username, user_id from \"user\"")
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().collect())
}
