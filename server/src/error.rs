//! The server layer's one error type.

use app::error::AppError;
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Input that failed validation; `field` names the input.
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("{message}")]
    Conflict {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    Forbidden(String),
    #[error("A valid bearer token is required.")]
    Unauthenticated,
    /// A request body over the route's limit.
    #[error("{0}")]
    TooLarge(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("session store: {0}")]
    Session(#[from] tower_sessions::session::Error),
    #[error("password hashing: {0}")]
    PasswordHash(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl ServerError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        ServerError::Invalid {
            field,
            message: message.into(),
        }
    }

    pub fn conflict(field: &'static str, message: impl Into<String>) -> Self {
        ServerError::Conflict {
            field,
            message: message.into(),
        }
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            ServerError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ServerError::NotFound(_) => StatusCode::NOT_FOUND,
            ServerError::Conflict { .. } => StatusCode::CONFLICT,
            ServerError::Forbidden(_) => StatusCode::FORBIDDEN,
            ServerError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ServerError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether the error is the server's fault (logged, shown to people only as a generic sentence).
    pub fn is_internal(&self) -> bool {
        self.status_code() == StatusCode::INTERNAL_SERVER_ERROR
    }
}

impl From<ServerError> for AppError {
    fn from(error: ServerError) -> Self {
        match error {
            ServerError::Invalid { field, message } => AppError::invalid(field, message),
            ServerError::NotFound(message) => AppError::NotFound(message),
            ServerError::Conflict { field, message } => AppError::conflict(field, message),
            ServerError::Forbidden(message) => AppError::Forbidden(message),
            ServerError::Unauthenticated => AppError::Unauthenticated,
            ServerError::TooLarge(message) => AppError::invalid("body", message),
            internal => {
                tracing::error!(error = %internal, "internal error");
                AppError::Internal
            }
        }
    }
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let field = match &self {
            ServerError::Invalid { field, .. } | ServerError::Conflict { field, .. } => {
                Some(*field)
            }
            _ => None,
        };
        let message = if self.is_internal() {
            tracing::error!(error = %self, "internal error");
            AppError::Internal.to_string()
        } else {
            self.to_string()
        };
        (
            status,
            Json(serde_json::json!({ "error": message, "field": field })),
        )
            .into_response()
    }
}
