//! Node operations shared by the CLI, the agent API and the JSON API.

use super::repo::{self, NodeRow};
use crate::{secrets, users::service::now, ServerError};
use sqlx::AnyPool;

/// Registers a node and returns it with its token (shown once; only the hash is kept).
pub async fn register_node(pool: &AnyPool, name: &str) -> Result<(NodeRow, String), ServerError> {
    let name = parse_node_name(name)?;
    let (token, hash) = secrets::generate("hgn_");
    match repo::insert_node(pool, &name, &hash, now()).await {
        Ok(node) => Ok((node, token)),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(ServerError::conflict(
            "name",
            format!("A node named \"{name}\" is already registered."),
        )),
        Err(error) => Err(error.into()),
    }
}

/// The node a bearer token belongs to.
pub async fn authenticate(pool: &AnyPool, token: &str) -> Result<Option<NodeRow>, ServerError> {
    Ok(repo::find_node_by_token(pool, &secrets::hash(token)).await?)
}

/// Admin actions: cordon (no new work, drain at min runtime), drain (same, said plainly), mark
/// unhealthy, uncordon (back to healthy).
pub async fn set_admin_state(
    pool: &AnyPool,
    name: &str,
    action: &str,
) -> Result<NodeRow, ServerError> {
    let state = match action {
        "cordon" | "drain" => "cordoned",
        "unhealthy" | "mark-unhealthy" => "unhealthy",
        "uncordon" | "healthy" => "healthy",
        other => {
            return Err(ServerError::invalid(
                "action",
                format!(
                "Unknown node action \"{other}\": use cordon, drain, mark-unhealthy or uncordon."
            ),
            ))
        }
    };
    let node = repo::find_node_by_name(pool, name)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("There is no node named \"{name}\".")))?;
    repo::set_admin_state(pool, node.node_id, state).await?;
    if state == "healthy" {
        // An admin returning a node to service also clears its agent's last failed check; if the
        // check still fails, the agent's next report takes the node out again.
        repo::set_agent_health(pool, node.node_id, None).await?;
    }
    Ok(repo::find_node_by_name(pool, name).await?.unwrap_or(node))
}

fn parse_node_name(raw: &str) -> Result<String, ServerError> {
    let name = raw.trim();
    if name.is_empty() || name.len() > 64 {
        return Err(ServerError::invalid(
            "name",
            "A node name has 1 to 64 characters.",
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ServerError::invalid(
            "name",
            format!("A node name may use letters, digits, '.', '_' and '-', not '{bad}'."),
        ));
    }
    Ok(name.to_string())
}
