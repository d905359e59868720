//! User operations shared by the CLI, the pages' server functions and (later) the JSON API.

use super::{
    domain::{parse_role, Password, Username},
    repo,
};
use crate::{auth::password, ServerError};
use app::model::{CurrentUser, UserSummary};
use sqlx::AnyPool;

pub async fn create_user(
    pool: &AnyPool,
    username: &str,
    role: &str,
    password: String,
    now: i64,
) -> Result<UserSummary, ServerError> {
    let username = Username::parse(username)?;
    let role = parse_role(role)?;
    let password = Password::parse(password)?;
    let hash = password::hash(password).await?;
    match repo::insert_user(pool, username.as_str(), &hash, role, now).await {
        Ok(record) => Ok(record.summary()),
        Err(error) if repo::is_username_taken(&error) => Err(ServerError::conflict(
            "username",
            format!("The username \"{}\" is already taken.", username.as_str()),
        )),
        Err(error) => Err(error.into()),
    }
}

/// The active user these credentials belong to, or `None` — for a wrong password, an unknown
/// username and a disabled account alike, so callers cannot tell which part was wrong.
pub async fn authenticate(
    pool: &AnyPool,
    username: &str,
    password: String,
) -> Result<Option<CurrentUser>, ServerError> {
    let record = repo::find_user_by_username(pool, username.trim()).await?;
    let Some(record) = record.filter(|r| !r.disabled) else {
        // Spend the same time as a real check so response times do not reveal usernames.
        password::verify_dummy(password).await?;
        return Ok(None);
    };
    let matches = password::verify(password, record.password_hash.clone()).await?;
    Ok(matches.then(|| record.current_user()))
}

/// The signed-in user behind a session's user id, if that account is still active.
pub async fn active_user(
    db: impl sqlx::AnyExecutor<'_>,
    user_id: i64,
) -> Result<Option<CurrentUser>, ServerError> {
    Ok(repo::find_user_by_id(db, user_id)
        .await?
        .filter(|r| !r.disabled)
        .map(|r| r.current_user()))
}

pub async fn reset_password(
    pool: &AnyPool,
    username: &str,
    password: String,
    now: i64,
) -> Result<UserSummary, ServerError> {
    let record = find_by_username(pool, username).await?;
    let password = Password::parse(password)?;
    let hash = password::hash(password).await?;
    repo::set_password_hash(pool, record.user_id, &hash, now).await?;
    Ok(record.summary())
}

pub async fn list_users(
    pool: &AnyPool,
    actor: &CurrentUser,
) -> Result<Vec<UserSummary>, ServerError> {
    require_admin(actor)?;
    Ok(repo::list_users(pool)
        .await?
        .iter()
        .map(|r| r.summary())
        .collect())
}

/// Disables or re-enables an account on behalf of `actor` (an admin, never on themselves).
pub async fn set_disabled(
    pool: &AnyPool,
    actor: &CurrentUser,
    user_id: i64,
    disabled: bool,
    now: i64,
) -> Result<UserSummary, ServerError> {
    require_admin(actor)?;
    if actor.id == user_id && disabled {
        return Err(ServerError::conflict(
            "",
            "You cannot disable your own account.",
        ));
    }
    repo::set_user_disabled(pool, user_id, disabled, now)
        .await?
        .map(|r| r.summary())
        .ok_or_else(|| ServerError::NotFound(format!("There is no user with id {user_id}.")))
}

/// Gives an account another role on behalf of `actor` (an admin, never their own: another admin
/// does that, so the last admin cannot lock everyone out). Effective on its next request.
pub async fn set_role(
    pool: &AnyPool,
    actor: &CurrentUser,
    user_id: i64,
    role: &str,
    now: i64,
) -> Result<UserSummary, ServerError> {
    require_admin(actor)?;
    let role = parse_role(role)?;
    if actor.id == user_id {
        return Err(ServerError::conflict(
            "role",
            "You cannot change your own role; another admin can.",
        ));
    }
    repo::set_user_role(pool, user_id, role, now)
        .await?
        .map(|r| r.summary())
        .ok_or_else(|| ServerError::NotFound(format!("There is no user with id {user_id}.")))
}

/// Gives an account another role by name (the admin CLI).
pub async fn set_role_by_username(
    pool: &AnyPool,
    username: &str,
    role: &str,
    now: i64,
) -> Result<UserSummary, ServerError> {
    let role = parse_role(role)?;
    let record = find_by_username(pool, username).await?;
    repo::set_user_role(pool, record.user_id, role, now)
        .await?
        .map(|r| r.summary())
        .ok_or_else(|| ServerError::NotFound(format!("There is no user named \"{username}\".")))
}

/// Disables or re-enables an account by name (the admin CLI, which acts with the machine's authority).
pub async fn set_disabled_by_username(
    pool: &AnyPool,
    username: &str,
    disabled: bool,
    now: i64,
) -> Result<UserSummary, ServerError> {
    let record = find_by_username(pool, username).await?;
    repo::set_user_disabled(pool, record.user_id, disabled, now)
        .await?
        .map(|r| r.summary())
        .ok_or_else(|| ServerError::NotFound(format!("There is no user named \"{username}\".")))
}

async fn find_by_username(pool: &AnyPool, username: &str) -> Result<repo::UserRecord, ServerError> {
    repo::find_user_by_username(pool, username.trim())
        .await?
        .ok_or_else(|| {
            ServerError::NotFound(format!("There is no user named \"{}\".", username.trim()))
        })
}

pub fn require_admin(actor: &CurrentUser) -> Result<(), ServerError> {
    if actor.is_admin() {
        Ok(())
    } else {
        Err(ServerError::Forbidden(
            "Only administrators can manage users.".into(),
        ))
    }
}
