//! Personal API tokens.

use crate::{secrets, users::service::now, ServerError};
use app::model::CurrentUser;
use sqlx::AnyPool;

/// Creates a token for `user_id`; returns the secret (shown once).
pub async fn create_token(pool: &AnyPool, user_id: i64, name: &str) -> Result<String, ServerError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 80 {
        return Err(ServerError::invalid(
            "name",
            "A token name has 1 to 80 characters.",
        ));
    }
    let (secret, hash) = secrets::generate("hgt_");
    sqlx::query(
        "insert into api_token (user_id, name, token_hash, created_at) values ($1, $2, $3, $4)",
    )
    .bind(user_id)
    .bind(name)
    .bind(hash)
    .bind(now())
    .execute(pool)
    .await?;
    Ok(secret)
}

/// The active user a token belongs to (not revoked, account enabled).
pub async fn authenticate(pool: &AnyPool, token: &str) -> Result<Option<CurrentUser>, ServerError> {
    let row: Option<(i64, i64)> = sqlx::query_as(
        "select t.api_token_id, u.user_id from api_token t join \"user\" u on u.user_id = t.user_id
         where t.token_hash = $1 and t.revoked_at is null and u.disabled = 0",
    )
    .bind(secrets::hash(token))
    .fetch_optional(pool)
    .await?;
    let Some((token_id, user_id)) = row else {
        return Ok(None);
    };
    sqlx::query("update api_token set last_used_at = $2 where api_token_id = $1")
        .bind(token_id)
        .bind(now())
        .execute(pool)
        .await?;
    crate::users::service::active_user(pool, user_id).await
}

/// The user's live tokens, newest first.
pub async fn list_tokens(
    pool: &AnyPool,
    user_id: i64,
) -> Result<Vec<app::tokens::TokenView>, ServerError> {
    Ok(sqlx::query_as(
        "select api_token_id, name, created_at, last_used_at from api_token
         where user_id = $1 and revoked_at is null order by api_token_id desc",
    )
    .bind(user_id)
    .fetch_all(pool)
    .await?)
}

/// Revokes one of the user's own tokens.
pub async fn revoke_token(pool: &AnyPool, user_id: i64, token_id: i64) -> Result<(), ServerError> {
    let done = sqlx::query(
        "update api_token set revoked_at = $3 where api_token_id = $1 and user_id = $2 and revoked_at is null",
    )
    .bind(token_id)
    .bind(user_id)
    .bind(now())
    .execute(pool)
    .await?;
    if done.rows_affected() == 0 {
        return Err(ServerError::NotFound(
            "You have no live token with that id.".into(),
        ));
    }
    Ok(())
}
