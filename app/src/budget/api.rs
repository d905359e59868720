//! Server functions of the tree, rebalancing and approvals pages.

use super::{ChangeRequestView, ImpactView, ProposalInput, TreeNodeView};
use crate::error::AppError;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;

#[server(prefix = "/api", endpoint = "budget/tree")]
pub async fn get_tree(#[server(default)] cluster: String) -> Result<Vec<TreeNodeView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.tree(&require_user()?, cluster).await }.await)
}

#[server(prefix = "/api", endpoint = "budget/propose", input = Json)]
pub async fn propose_change(input: ProposalInput) -> Result<ChangeRequestView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.propose_change(&require_user()?, input).await }.await)
}

/// `scope`: `awaiting` (requests the signed-in person may decide) or `all`.
#[server(prefix = "/api", endpoint = "budget/requests")]
pub async fn list_change_requests(
    scope: String,
    node: Option<String>,
) -> Result<Vec<ChangeRequestView>, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .change_requests(&require_user()?, scope, node)
                .await
        }
        .await,
    )
}

#[server(prefix = "/api", endpoint = "budget/decide")]
pub async fn decide_change(
    id: i64,
    approve: bool,
    comment: String,
) -> Result<ChangeRequestView, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .decide_change(&require_user()?, id, approve, comment)
                .await
        }
        .await,
    )
}

#[server(prefix = "/api", endpoint = "budget/impact")]
pub async fn change_impact(id: i64) -> Result<ImpactView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.change_impact(&require_user()?, id).await }.await)
}

/// The proposer takes a waiting request back.
#[server(prefix = "/api", endpoint = "budget/withdraw")]
pub async fn withdraw_change(id: i64) -> Result<ChangeRequestView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.withdraw_change(&require_user()?, id).await }.await)
}

/// The proposer of a stale request proposes it again on today's shares.
#[server(prefix = "/api", endpoint = "budget/rebase")]
pub async fn rebase_change(id: i64) -> Result<ChangeRequestView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.rebase_change(&require_user()?, id).await }.await)
}
