//! SQL for the sign-in throttle's failures.

use sqlx::AnyExecutor;

/// How many failures since `since` match `column` (`account` or `address`) = `key`, and the
/// oldest of them.
pub async fn failures_since(
    db: impl AnyExecutor<'_>,
    column: &str,
    key: &str,
    since: i64,
) -> Result<(i64, Option<i64>), sqlx::Error> {
    let column = match column {
        "account" => "account",
        _ => "address",
    };
    sqlx::query_as(&format!(
        "select count(*), min(at) from sign_in_failure where {column} = $1 and at > $2"
    ))
    .bind(key)
    .bind(since)
    .fetch_one(db)
    .await
}

pub async fn insert_failure(
    db: impl AnyExecutor<'_>,
    account: &str,
    address: Option<&str>,
    at: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("insert into sign_in_failure (account, address, at) values ($1, $2, $3)")
        .bind(account)
        .bind(address)
        .bind(at)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn forget_failures_until(
    db: impl AnyExecutor<'_>,
    until: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("delete from sign_in_failure where at <= $1")
        .bind(until)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn forget_account(db: impl AnyExecutor<'_>, account: &str) -> Result<(), sqlx::Error> {
    sqlx::query("delete from sign_in_failure where account = $1")
        .bind(account)
        .execute(db)
        .await?;
    Ok(())
}
