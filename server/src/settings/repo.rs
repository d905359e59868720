//! SQL for the settings and their audit trail.

use sqlx::{AnyConnection, AnyExecutor};

/// One stored setting, if set.
pub async fn value(db: impl AnyExecutor<'_>, key: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("select value from setting where key = $1")
        .bind(key)
        .fetch_optional(db)
        .await
}

/// Every stored setting as `(key, value)`.
pub async fn all(db: impl AnyExecutor<'_>) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as("select key, value from setting")
        .fetch_all(db)
        .await
}

/// One row of the audit trail.
#[derive(Debug, sqlx::FromRow)]
pub struct Change {
    pub changed_at: i64,
    pub username: String,
    pub key: String,
    pub old_value: String,
    pub new_value: String,
    pub reason: Option<String>,
}

/// The last 50 changes, newest first.
pub async fn history(db: impl AnyExecutor<'_>) -> Result<Vec<Change>, sqlx::Error> {
    sqlx::query_as(
        "select c.changed_at, u.username, c.key, c.old_value, c.new_value, c.reason from setting_change c
         join \"user\" u on u.user_id = c.changed_by order by c.setting_change_id desc limit 50",
    )
    .fetch_all(db)
    .await
}

/// Sets `key` to `after` and records the change, with the admin's reason if one was given.
#[allow(clippy::too_many_arguments)]
pub async fn change(
    db: &mut AnyConnection,
    key: &str,
    before: &str,
    after: &str,
    reason: Option<&str>,
    by: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    store(&mut *db, key, after, by, now).await?;
    audit(db, key, before, after, reason, by, now).await
}

/// Sets `key` to `value`, unaudited: [`audit`] records what people may read of it.
pub async fn store(
    db: &mut AnyConnection,
    key: &str,
    value: &str,
    by: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into setting (key, value, updated_at, updated_by) values ($1, $2, $3, $4)
         on conflict (key) do update set value = excluded.value, updated_at = excluded.updated_at,
         updated_by = excluded.updated_by",
    )
    .bind(key)
    .bind(value)
    .bind(now)
    .bind(by)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Records a change in the audit trail as `before` → `after`.
#[allow(clippy::too_many_arguments)]
pub async fn audit(
    db: &mut AnyConnection,
    key: &str,
    before: &str,
    after: &str,
    reason: Option<&str>,
    by: i64,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into setting_change (key, old_value, new_value, reason, changed_at, changed_by)
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(key)
    .bind(before)
    .bind(after)
    .bind(reason)
    .bind(now)
    .bind(by)
    .execute(&mut *db)
    .await?;
    Ok(())
}
