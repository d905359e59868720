//! Server functions of the Tokens page.

use super::TokenView;
use crate::error::AppError;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "tokens/list")]
pub async fn list_tokens() -> Result<Vec<TokenView>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.list_tokens(&require_user()?).await }.await)
}

/// Creates a personal API token; returns the secret (shown once).
#[server(prefix = "/api", endpoint = "tokens/create")]
pub async fn create_token(name: String) -> Result<String, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.create_token(&require_user()?, name).await }.await)
}

#[server(prefix = "/api", endpoint = "tokens/revoke")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.revoke_token(&require_user()?, id).await }.await)
}
