//! Clusters: named pools of nodes (DESIGN's single cluster, several times). The budget tree and
//! its shares apply on every cluster; the ledger, the standings, ranking and preemption are kept
//! per cluster, so a team busy on one cluster is not penalised on another. A workload names the
//! cluster it runs on; nodes belong to the cluster they were registered in.

pub mod repo;

use crate::ServerError;
use app::nodes::ClusterSummary;
use sqlx::AnyConnection;

/// The cluster everything belongs to until a second one is named.
pub const DEFAULT: &str = "default";

/// Its id (the migration creates it).
pub const DEFAULT_ID: i64 = 1;

/// A cluster as the server refers to it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Cluster {
    pub cluster_id: i64,
    pub name: String,
}

/// Reads a cluster name as typed: 1 to 40 letters, digits, '.', '_' or '-'.
pub fn parse_name(field: &'static str, raw: &str) -> Result<String, ServerError> {
    let name = raw.trim();
    if name.is_empty() || name.len() > 40 {
        return Err(ServerError::invalid(
            field,
            "A cluster name has 1 to 40 characters.",
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ServerError::invalid(
            field,
            format!("A cluster name may use letters, digits, '.', '_' and '-', not '{bad}'."),
        ));
    }
    Ok(name.to_string())
}

/// The cluster named `name`, created if it does not exist yet (registering a node names it).
pub async fn ensure(db: &mut AnyConnection, name: &str, now: i64) -> Result<Cluster, ServerError> {
    let name = parse_name("cluster", name)?;
    if let Some(found) = repo::find_by_name(&mut *db, &name).await? {
        return Ok(found);
    }
    repo::insert(&mut *db, &name, now).await?;
    repo::find_by_name(&mut *db, &name)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("cluster {name}")))
}

/// The clusters people choose from: those with at least one registered node, by name; the
/// default cluster alone while no node is registered anywhere.
pub async fn in_use(db: &mut AnyConnection) -> Result<Vec<ClusterSummary>, ServerError> {
    let mut list = repo::summaries(&mut *db).await?;
    list.retain(|c| c.nodes > 0);
    if list.is_empty() {
        list.push(ClusterSummary {
            name: DEFAULT.into(),
            nodes: 0,
            gpus: 0,
            healthy_gpus: 0,
        });
    }
    Ok(list)
}

/// The cluster a submission runs on: the one it names, which must exist; without a name, the only
/// cluster in use, and a clear refusal naming the choices when there are several.
pub async fn for_submit(
    db: &mut AnyConnection,
    named: Option<&str>,
) -> Result<Cluster, ServerError> {
    let named = named.map(str::trim).filter(|n| !n.is_empty());
    let in_use = in_use(&mut *db).await?;
    let choices = in_use
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let name = match named {
        Some(name) => name.to_string(),
        None if in_use.len() == 1 => in_use[0].name.clone(),
        None => {
            return Err(ServerError::invalid(
                "cluster",
                format!("Choose the cluster to run on ({choices})."),
            ))
        }
    };
    repo::find_by_name(&mut *db, &name).await?.ok_or_else(|| {
        ServerError::invalid(
            "cluster",
            format!("There is no cluster \"{name}\"; choose one of: {choices}."),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::parse_name;

    #[test]
    fn a_cluster_name_is_a_short_word_without_spaces() {
        assert_eq!(parse_name("cluster", " h100-east ").unwrap(), "h100-east");
        assert!(parse_name("cluster", "").is_err());
        assert!(parse_name("cluster", "two words").is_err());
        assert!(parse_name("cluster", &"x".repeat(41)).is_err());
    }
}
