//! The budget tree in the database: nodes, versioned shares, owners and members.

pub mod changes;
pub mod impact;
pub mod import;
pub mod org_file;
pub mod people;
pub mod repo;
pub mod shares;
pub mod snapshot;
pub mod view;

/// The id of the tree node at `path` (not removed), or a 404 that names it.
pub async fn node_id(db: &mut sqlx::AnyConnection, path: &str) -> Result<i64, crate::ServerError> {
    let node: Option<i64> = sqlx::query_scalar(
        "select budget_node_id from budget_node where path = $1 and removed_at is null",
    )
    .bind(path)
    .fetch_optional(db)
    .await?;
    node.ok_or_else(|| {
        crate::ServerError::NotFound(format!("There is no node {path:?} in the tree."))
    })
}
