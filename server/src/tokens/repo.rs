//! SQL for `api_token`.

use app::tokens::TokenView;
use sqlx::{AnyExecutor, FromRow};

pub async fn insert(
    db: impl AnyExecutor<'_>,
    user_id: i64,
    name: &str,
    hash: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into api_token (user_id, name, token_hash, created_at) values ($1, $2, $3, $4)",
    )
    .bind(user_id)
    .bind(name)
    .bind(hash)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

/// A live token (not revoked, its owner enabled).
#[derive(Debug, Clone, FromRow)]
pub struct LiveToken {
    pub api_token_id: i64,
    pub user_id: i64,
    pub last_used_at: Option<i64>,
}

pub async fn find_live(
    db: impl AnyExecutor<'_>,
    hash: &str,
) -> Result<Option<LiveToken>, sqlx::Error> {
    sqlx::query_as(
        "select t.api_token_id, u.user_id, t.last_used_at from api_token t join \"user\" u on u.user_id = t.user_id
         where t.token_hash = $1 and t.revoked_at is null and u.disabled = 0",
    )
    .bind(hash)
    .fetch_optional(db)
    .await
}

pub async fn mark_used(
    db: impl AnyExecutor<'_>,
    token_id: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("update api_token set last_used_at = $2 where api_token_id = $1")
        .bind(token_id)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// The user's live tokens, newest first.
pub async fn list_live(
    db: impl AnyExecutor<'_>,
    user_id: i64,
) -> Result<Vec<TokenView>, sqlx::Error> {
    sqlx::query_as(
        "select api_token_id, name, created_at, last_used_at from api_token
         where user_id = $1 and revoked_at is null order by api_token_id desc",
    )
    .bind(user_id)
    .fetch_all(db)
    .await
}

/// Revokes one of the user's live tokens; whether there was one.
pub async fn revoke(
    db: impl AnyExecutor<'_>,
    user_id: i64,
    token_id: i64,
    now: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "update api_token set revoked_at = $3 where api_token_id = $1 and user_id = $2 and revoked_at is null",
    )
    .bind(token_id)
    .bind(user_id)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}
