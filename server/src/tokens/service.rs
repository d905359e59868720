//! Personal API tokens: created and revoked by their owner, checked on every API call.

use super::repo;
use crate::{secrets, ServerError};
use app::{model::CurrentUser, tokens::TokenView};
use sqlx::AnyPool;

/// How stale a token's "last used" may get before a call records it again: authenticating is a
/// read, and only one call a minute per token needs the database's write lock.
pub const LAST_USED_PRECISION_S: i64 = 60;

/// Creates a token for `user_id`; returns the secret (shown once).
pub async fn create_token(
    pool: &AnyPool,
    user_id: i64,
    name: &str,
    now: i64,
) -> Result<String, ServerError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 80 {
        return Err(ServerError::invalid(
            "name",
            "A token name has 1 to 80 characters.",
        ));
    }
    let (secret, hash) = secrets::generate("hgt_");
    repo::insert(pool, user_id, name, &hash, now).await?;
    Ok(secret)
}

/// The active user a token belongs to (not revoked, account enabled), at `now`.
pub async fn authenticate(
    pool: &AnyPool,
    token: &str,
    now: i64,
) -> Result<Option<CurrentUser>, ServerError> {
    // One connection for all of it: every borrow waits its turn behind the pages' (see
    // `workloads::service::submit`).
    let mut db = pool.acquire().await?;
    let Some(live) = repo::find_live(&mut *db, &secrets::hash(token)).await? else {
        return Ok(None);
    };
    if live
        .last_used_at
        .is_none_or(|t| now - t >= LAST_USED_PRECISION_S)
    {
        repo::mark_used(&mut *db, live.api_token_id, now).await?;
    }
    crate::users::service::active_user(&mut *db, live.user_id).await
}

/// The user's live tokens, newest first.
pub async fn list_tokens(pool: &AnyPool, user_id: i64) -> Result<Vec<TokenView>, ServerError> {
    Ok(repo::list_live(pool, user_id).await?)
}

/// Revokes one of the user's own tokens.
pub async fn revoke_token(
    pool: &AnyPool,
    user_id: i64,
    token_id: i64,
    now: i64,
) -> Result<(), ServerError> {
    if !repo::revoke(pool, user_id, token_id, now).await? {
        return Err(ServerError::NotFound(
            "You have no live token with that id.".into(),
        ));
    }
    Ok(())
}
