//! SQL for the `node` table.

use app::nodes::NodeHealth;
use serde::Serialize;
use sqlx::{AnyConnection, AnyExecutor, FromRow};

#[derive(Debug, Clone, FromRow, Serialize)]
pub struct NodeRow {
    pub node_id: i64,
    pub name: String,
    pub gpu_model: String,
    pub gpu_count: i64,
    /// What an admin set: healthy, unhealthy or cordoned.
    #[sqlx(try_from = "String")]
    pub admin_state: NodeHealth,
    #[sqlx(try_from = "crate::db::Flag")]
    pub agent_healthy: bool,
    pub down_since: Option<i64>,
    pub registered_at: i64,
    pub last_heartbeat_at: Option<i64>,
    /// Why the agent reported the node unhealthy, and since when (kept until it recovers).
    pub health_reason: Option<String>,
    pub unhealthy_since: Option<i64>,
    /// Random per registration ('' on nodes registered before it existed).
    pub registration_key: String,
    pub cluster_id: i64,
    /// Its cluster's name.
    pub cluster: String,
}

impl NodeRow {
    /// What the agent keeps with its state to know the state is this registration's: unique
    /// across databases and re-registrations of the same name.
    pub fn node_key(&self) -> String {
        if self.registration_key.is_empty() {
            format!("{}:{}", self.node_id, self.registered_at)
        } else {
            self.registration_key.clone()
        }
    }

    /// The health the engine sees: down beats everything, then unhealthy (admin or agent), then
    /// the admin's state. A node is down until its agent has both spoken and reported its GPUs:
    /// a first sync records the heartbeat before the inventory, and a node shown healthy in
    /// between would refuse every submission as "no GPU node has connected".
    pub fn health(&self) -> NodeHealth {
        if self.down_since.is_some() || self.last_heartbeat_at.is_none() || self.gpu_count == 0 {
            NodeHealth::Down
        } else if self.admin_state == NodeHealth::Unhealthy || !self.agent_healthy {
            NodeHealth::Unhealthy
        } else if self.admin_state == NodeHealth::Cordoned {
            NodeHealth::Cordoned
        } else {
            NodeHealth::Healthy
        }
    }
}

/// A node as a scheduler pass sees it: its GPUs and its health ([`NodeRow::health`], worked out
/// by the database), and what events name it by. A pass reads every node: the lighter row keeps
/// that cheap at a thousand nodes.
#[derive(Debug, Clone, FromRow)]
pub struct PassNode {
    pub node_id: i64,
    pub name: String,
    pub gpu_count: i64,
    #[sqlx(try_from = "String")]
    pub health: NodeHealth,
    pub health_reason: Option<String>,
    pub cluster_id: i64,
}

/// A node's health as the Nodes page states it, worked out by the database.
const HEALTH: &str = "case when down_since is not null or last_heartbeat_at is null then 'down'
                          when admin_state = 'unhealthy' or agent_healthy = 0 then 'unhealthy'
                          when admin_state = 'cordoned' then 'cordoned'
                          else 'healthy' end";

/// Nodes with GPUs (registered but never connected ones hold no work), by id.
pub async fn pass_nodes(db: impl AnyExecutor<'_>) -> Result<Vec<PassNode>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select node_id, name, gpu_count, health_reason, cluster_id, {HEALTH} as health
         from node where gpu_count > 0 order by node_id"
    ))
    .fetch_all(db)
    .await
}

/// Each cluster's healthy GPUs, for every cluster with a node that has GPUs (one row each, where
/// [`pass_nodes`] reads every node: the ledger books capacity at every pass).
pub async fn healthy_gpus(db: impl AnyExecutor<'_>) -> Result<Vec<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select cluster_id, cast(sum(case when {HEALTH} = 'healthy' then gpu_count else 0 end) as bigint)
         from node where gpu_count > 0 group by cluster_id order by cluster_id"
    ))
    .fetch_all(db)
    .await
}

const COLUMNS: &str =
    "node_id, name, gpu_model, gpu_count, admin_state, agent_healthy, down_since, registered_at,
                       last_heartbeat_at, health_reason, unhealthy_since, registration_key, cluster_id,
                       (select c.name from cluster c where c.cluster_id = node.cluster_id) as cluster";

pub async fn insert_node(
    db: &mut sqlx::AnyConnection,
    name: &str,
    cluster_id: i64,
    token_hash: &str,
    now: i64,
) -> Result<NodeRow, sqlx::Error> {
    let id: i64 = sqlx::query_scalar(
        "insert into node (name, token_hash, registered_at, registration_key, cluster_id)
         values ($1, $2, $3, $4, $5) returning node_id",
    )
    .bind(name)
    .bind(token_hash)
    .bind(now)
    .bind(crate::secrets::random_id())
    .bind(cluster_id)
    .fetch_one(&mut *db)
    .await?;
    sqlx::query_as(&format!("select {COLUMNS} from node where node_id = $1"))
        .bind(id)
        .fetch_one(&mut *db)
        .await
}

pub async fn find_node_by_token(
    db: impl AnyExecutor<'_>,
    token_hash: &str,
) -> Result<Option<NodeRow>, sqlx::Error> {
    sqlx::query_as(&format!("select {COLUMNS} from node where token_hash = $1"))
        .bind(token_hash)
        .fetch_optional(db)
        .await
}

pub async fn find_node_by_name(
    db: impl AnyExecutor<'_>,
    name: &str,
) -> Result<Option<NodeRow>, sqlx::Error> {
    sqlx::query_as(&format!("select {COLUMNS} from node where name = $1"))
        .bind(name)
        .fetch_optional(db)
        .await
}

pub async fn list_nodes(db: impl AnyExecutor<'_>) -> Result<Vec<NodeRow>, sqlx::Error> {
    sqlx::query_as(&format!("select {COLUMNS} from node order by node_id"))
        .fetch_all(db)
        .await
}

/// Records that the node's agent spoke now (a down node comes back). A sync from a node already
/// known to be alive notes its heartbeat for a batch instead (see [`super::heartbeats`]).
pub async fn touch_heartbeat(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("update node set last_heartbeat_at = $2, down_since = null where node_id = $1")
        .bind(node_id)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// Writes heartbeats noted for a batch, `(node, at)`, a few hundred nodes per statement; a
/// stored heartbeat that is later already (another replica wrote it) is kept.
pub async fn write_heartbeats(
    db: &mut AnyConnection,
    beats: &[(i64, i64)],
) -> Result<(), sqlx::Error> {
    // Integers the server holds, written into the statement (sqlx's `Any` binds no arrays).
    for chunk in beats.chunks(crate::db::ID_CHUNK) {
        let at: String = chunk
            .iter()
            .map(|(node, at)| format!(" when {node} then {at}"))
            .collect();
        let ids: Vec<i64> = chunk.iter().map(|&(node, _)| node).collect();
        sqlx::query(&format!(
            "update node set last_heartbeat_at = case node_id{at} end
             where node_id in ({}) and (last_heartbeat_at is null or last_heartbeat_at < case node_id{at} end)",
            crate::db::id_list(&ids)
        ))
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// Records the GPUs the agent reports.
pub async fn record_gpus(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    gpu_count: i64,
    gpu_model: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("update node set gpu_count = $2, gpu_model = $3 where node_id = $1")
        .bind(node_id)
        .bind(gpu_count)
        .bind(gpu_model)
        .execute(db)
        .await?;
    Ok(())
}

/// Sets the agent-reported health: unhealthy with its reason and since when, or healthy again.
pub async fn set_agent_health(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    unhealthy: Option<(&str, i64)>,
) -> Result<(), sqlx::Error> {
    let (reason, since) = unhealthy.unzip();
    sqlx::query(
        "update node set agent_healthy = $2, health_reason = $3, unhealthy_since = $4 where node_id = $1",
    )
    .bind(node_id)
    .bind(i64::from(unhealthy.is_none()))
    .bind(reason)
    .bind(since)
    .execute(db)
    .await?;
    Ok(())
}

/// Numbers a new sync answer for the node.
pub async fn next_answer(db: impl AnyExecutor<'_>, node_id: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "update node set answers_sent = answers_sent + 1 where node_id = $1 returning answers_sent",
    )
    .bind(node_id)
    .fetch_one(db)
    .await
}

/// Marks nodes whose last heartbeat is older than `deadline` as down; returns how many.
pub async fn mark_silent_nodes_down(
    db: impl AnyExecutor<'_>,
    deadline: i64,
    now: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(
        "update node set down_since = $2
         where down_since is null and last_heartbeat_at is not null and last_heartbeat_at < $1",
    )
    .bind(deadline)
    .bind(now)
    .execute(db)
    .await?
    .rows_affected())
}

pub async fn set_admin_state(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    state: NodeHealth,
) -> Result<(), sqlx::Error> {
    sqlx::query("update node set admin_state = $2 where node_id = $1")
        .bind(node_id)
        .bind(state.as_str())
        .execute(db)
        .await?;
    Ok(())
}

/// An open run's GPUs and what the Nodes page says about their holder.
#[derive(Debug, Clone, FromRow)]
pub struct HeldGpus {
    pub node_id: i64,
    pub gpu_indices: String,
    pub workload_id: i64,
    pub name: String,
    pub project: String,
    pub protected_until: Option<i64>,
    #[sqlx(try_from = "crate::db::Flag")]
    pub allocated: bool,
    pub owner: String,
}

/// The GPUs every open run holds, by node.
pub async fn held_gpus(db: impl AnyExecutor<'_>) -> Result<Vec<HeldGpus>, sqlx::Error> {
    sqlx::query_as(
        "select r.node_id, r.gpu_indices, w.workload_id, w.name, b.path as project, r.protected_until, r.allocated,
                u.username as owner
         from workload_run r join workload w on w.workload_id = r.workload_id
         join budget_node b on b.budget_node_id = w.budget_node_id
         join \"user\" u on u.user_id = w.user_id
         where r.ended_at is null order by r.node_id",
    )
    .fetch_all(db)
    .await
}

/// Deletes a node that never connected (no heartbeat, no run ever placed on it); says whether
/// one was deleted.
pub async fn delete_unused_node(
    db: impl AnyExecutor<'_>,
    node_id: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "delete from node where node_id = $1 and last_heartbeat_at is null
           and not exists (select 1 from workload_run r where r.node_id = $1)",
    )
    .bind(node_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives the node a new agent token (its hash).
pub async fn set_token_hash(
    db: impl AnyExecutor<'_>,
    node_id: i64,
    hash: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("update node set token_hash = $2 where node_id = $1")
        .bind(node_id)
        .bind(hash)
        .execute(db)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{NodeHealth, NodeRow};

    fn node() -> NodeRow {
        NodeRow {
            node_id: 1,
            name: "n1".into(),
            gpu_model: "NVIDIA H200".into(),
            gpu_count: 8,
            admin_state: NodeHealth::Healthy,
            agent_healthy: true,
            down_since: None,
            registered_at: 0,
            last_heartbeat_at: Some(10),
            registration_key: String::new(),
            health_reason: None,
            unhealthy_since: None,
            cluster_id: 1,
            cluster: "default".into(),
        }
    }

    #[test]
    fn a_node_is_up_only_once_its_agent_has_spoken_and_reported_its_gpus() {
        assert_eq!(node().health(), NodeHealth::Healthy);
        let silent = NodeRow {
            last_heartbeat_at: None,
            ..node()
        };
        assert_eq!(silent.health(), NodeHealth::Down);
        let no_inventory_yet = NodeRow {
            gpu_count: 0,
            ..node()
        };
        assert_eq!(no_inventory_yet.health(), NodeHealth::Down);
    }
}
