//! Personal API tokens as the Tokens page lists them.

pub mod api;

use serde::{Deserialize, Serialize};

/// A personal API token as listed (never the secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(sqlx::FromRow))]
pub struct TokenView {
    pub api_token_id: i64,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}
