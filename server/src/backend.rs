//! The server's implementation of the UI's [`Backend`]: the services, with the actor's rights checked.

use crate::users::service;
use app::{
    backend::Backend,
    error::AppError,
    model::{CurrentUser, NewUser, UserSummary},
};
use sqlx::SqlitePool;

pub struct ServerBackend {
    pool: SqlitePool,
}

impl ServerBackend {
    pub fn new(pool: SqlitePool) -> Self {
        ServerBackend { pool }
    }
}

#[async_trait::async_trait]
impl Backend for ServerBackend {
    async fn list_users(&self, actor: &CurrentUser) -> Result<Vec<UserSummary>, AppError> {
        Ok(service::list_users(&self.pool, actor).await?)
    }

    async fn create_user(
        &self,
        actor: &CurrentUser,
        input: NewUser,
    ) -> Result<UserSummary, AppError> {
        service::require_admin(actor)?;
        let user =
            service::create_user(&self.pool, &input.username, &input.role, input.password).await?;
        tracing::info!(actor = %actor.username, user = %user.username, role = %user.role, "user created");
        Ok(user)
    }

    async fn set_user_disabled(
        &self,
        actor: &CurrentUser,
        user_id: i64,
        disabled: bool,
    ) -> Result<UserSummary, AppError> {
        let user = service::set_disabled(&self.pool, actor, user_id, disabled).await?;
        tracing::info!(actor = %actor.username, user = %user.username, disabled, "user access changed");
        Ok(user)
    }
}
