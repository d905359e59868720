//! Server functions of the Nodes page.

use super::{NodeView, RegisteredNode};
use crate::error::AppError;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "nodes/list")]
pub async fn list_nodes() -> Result<Vec<NodeView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.nodes(&require_user()?).await }.await)
}

#[server(name = SetNodeState, prefix = "/api", endpoint = "nodes/action")]
pub async fn node_action(name: String, action: String) -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.node_action(&require_user()?, name, action).await }.await)
}

/// Registers a node in a cluster (blank: the default one, created when new); returns its name and
/// agent token (shown once).
#[server(prefix = "/api", endpoint = "nodes/register")]
pub async fn register_node(
    name: String,
    #[server(default)] cluster: String,
) -> Result<RegisteredNode, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .register_node(&require_user()?, name, cluster)
                .await
        }
        .await,
    )
}

/// The clusters with registered nodes (the default one while there are none), by name.
#[server(name = GetClusters, prefix = "/api", endpoint = "clusters")]
pub async fn clusters() -> Result<Vec<super::ClusterSummary>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.clusters(&require_user()?).await }.await)
}

/// Removes a node whose agent never connected (registered by mistake).
#[server(prefix = "/api", endpoint = "nodes/remove")]
pub async fn remove_node(name: String) -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.remove_node(&require_user()?, name).await }.await)
}
