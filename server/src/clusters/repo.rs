//! SQL for the `cluster` table.

use super::Cluster;
use app::nodes::ClusterSummary;
use sqlx::{AnyExecutor, FromRow};

pub async fn find_by_name(
    db: impl AnyExecutor<'_>,
    name: &str,
) -> Result<Option<Cluster>, sqlx::Error> {
    sqlx::query_as("select cluster_id, name from cluster where name = $1")
        .bind(name)
        .fetch_optional(db)
        .await
}

pub async fn insert(db: impl AnyExecutor<'_>, name: &str, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query("insert into cluster (name, created_at) values ($1, $2)")
        .bind(name)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// The clusters with healthy capacity recorded in `[from, to)`, by id.
pub async fn with_capacity_between(
    db: impl AnyExecutor<'_>,
    from: i64,
    to: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "select distinct cluster_id from capacity_hour
         where hour >= $1 and hour < $2 and healthy_gpu_s > 0 order by cluster_id",
    )
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// Every cluster by id.
pub async fn all(db: impl AnyExecutor<'_>) -> Result<Vec<Cluster>, sqlx::Error> {
    sqlx::query_as("select cluster_id, name from cluster order by cluster_id")
        .fetch_all(db)
        .await
}

#[derive(FromRow)]
struct SummaryRow {
    name: String,
    nodes: i64,
    gpus: i64,
    healthy_gpus: i64,
}

/// Every cluster by name, with its registered nodes, their GPUs, and the GPUs of nodes that are
/// connected and take work.
pub async fn summaries(db: impl AnyExecutor<'_>) -> Result<Vec<ClusterSummary>, sqlx::Error> {
    let rows: Vec<SummaryRow> = sqlx::query_as(
        "select c.name, count(n.node_id) as nodes,
                cast(coalesce(sum(n.gpu_count), 0) as bigint) as gpus,
                cast(coalesce(sum(case when n.down_since is null and n.last_heartbeat_at is not null
                                        and n.admin_state = 'healthy' and n.agent_healthy = 1
                                   then n.gpu_count else 0 end), 0) as bigint) as healthy_gpus
         from cluster c left join node n on n.cluster_id = c.cluster_id
         group by c.cluster_id, c.name order by c.name",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ClusterSummary {
            name: r.name,
            nodes: r.nodes,
            gpus: r.gpus,
            healthy_gpus: r.healthy_gpus,
        })
        .collect())
}
