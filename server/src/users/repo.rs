//! SQL for the `user` table.

use app::model::{CurrentUser, Role, UserSummary};
use sqlx::{AnyPool, FromRow};

/// A user row including the password hash; never serialized.
#[derive(FromRow)]
pub struct UserRecord {
    pub user_id: i64,
    pub username: String,
    pub password_hash: String,
    pub role: String,
    #[sqlx(try_from = "crate::db::Flag")]
    pub disabled: bool,
    pub created_at: i64,
}

impl UserRecord {
    fn role(&self) -> Role {
        // The table's check constraint admits only the three roles.
        self.role.parse().unwrap_or(Role::Researcher)
    }

    pub fn summary(&self) -> UserSummary {
        UserSummary {
            id: self.user_id,
            username: self.username.clone(),
            role: self.role(),
            disabled: self.disabled,
            created_at: self.created_at,
        }
    }

    pub fn current_user(&self) -> CurrentUser {
        CurrentUser {
            id: self.user_id,
            username: self.username.clone(),
            role: self.role(),
        }
    }
}

const COLUMNS: &str = "user_id, username, password_hash, role, disabled, created_at";

pub async fn insert_user(
    pool: &AnyPool,
    username: &str,
    password_hash: &str,
    role: Role,
    now: i64,
) -> Result<UserRecord, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!(
        "insert into \"user\" (username, password_hash, role, disabled, created_at, updated_at)
         values ($1, $2, $3, 0, $4, $4) returning {COLUMNS}"
    ))
    .bind(username)
    .bind(password_hash)
    .bind(role.as_str())
    .bind(now)
    .fetch_one(pool)
    .await
}

pub async fn find_user_by_username(
    pool: &AnyPool,
    username: &str,
) -> Result<Option<UserRecord>, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!(
        "select {COLUMNS} from \"user\" where lower(username) = lower($1)"
    ))
    .bind(username)
    .fetch_optional(pool)
    .await
}

pub async fn find_user_by_id(
    db: impl sqlx::AnyExecutor<'_>,
    user_id: i64,
) -> Result<Option<UserRecord>, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!(
        "select {COLUMNS} from \"user\" where user_id = $1"
    ))
    .bind(user_id)
    .fetch_optional(db)
    .await
}

pub async fn list_users(pool: &AnyPool) -> Result<Vec<UserRecord>, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!("select {COLUMNS} from \"user\" order by username"))
        .fetch_all(pool)
        .await
}

pub async fn set_user_disabled(
    pool: &AnyPool,
    user_id: i64,
    disabled: bool,
    now: i64,
) -> Result<Option<UserRecord>, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!(
        "update \"user\" set disabled = $2, updated_at = $3 where user_id = $1 returning {COLUMNS}"
    ))
    .bind(user_id)
    .bind(i64::from(disabled))
    .bind(now)
    .fetch_optional(pool)
    .await
}

pub async fn set_user_role(
    pool: &AnyPool,
    user_id: i64,
    role: Role,
    now: i64,
) -> Result<Option<UserRecord>, sqlx::Error> {
    sqlx::query_as::<_, UserRecord>(&format!(
        "update \"user\" set role = $2, updated_at = $3 where user_id = $1 returning {COLUMNS}"
    ))
    .bind(user_id)
    .bind(role.as_str())
    .bind(now)
    .fetch_optional(pool)
    .await
}

pub async fn set_password_hash(
    pool: &AnyPool,
    user_id: i64,
    password_hash: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("update \"user\" set password_hash = $2, updated_at = $3 where user_id = $1")
        .bind(user_id)
        .bind(password_hash)
        .bind(now)
        .execute(pool)
        .await?;
    Ok(())
}

/// Whether `error` is the unique-username violation.
pub fn is_username_taken(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}
