//! Server functions of the Users page (admin only, enforced by the backend).

use crate::{error::AppError, model::UserSummary};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "users/list")]
pub async fn list_users() -> Result<Vec<UserSummary>, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.list_users(&require_user()?).await }.await)
}

#[server(prefix = "/api", endpoint = "users/create")]
pub async fn create_user(
    username: String,
    role: String,
    password: String,
) -> Result<UserSummary, AppError> {
    use crate::{backend::*, model::NewUser};
    let input = NewUser {
        username,
        role,
        password,
    };
    with_status(async { backend()?.create_user(&require_user()?, input).await }.await)
}

/// Gives user `user_id` another role (`researcher`, `leadership` or `admin`).
#[server(prefix = "/api", endpoint = "users/set-role")]
pub async fn set_user_role(user_id: i64, role: String) -> Result<UserSummary, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .set_user_role(&require_user()?, user_id, role)
                .await
        }
        .await,
    )
}

#[server(prefix = "/api", endpoint = "users/set-disabled")]
pub async fn set_user_disabled(user_id: i64, disabled: bool) -> Result<UserSummary, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .set_user_disabled(&require_user()?, user_id, disabled)
                .await
        }
        .await,
    )
}
