//! The one error type of the UI layer: what a server function can tell a person.

use leptos::server_fn::{codec::JsonEncoding, error::FromServerFnError, error::ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// Errors a server function returns. Client-facing variants carry a sentence for people;
/// internal failures are logged on the server and shown as [`AppError::Internal`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("Please sign in to continue.")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(String),
    /// Input that failed validation; `field` names the form field it belongs to.
    #[error("{message}")]
    Invalid { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    /// The request clashes with existing data (a taken name, a stale version); `field` may be empty.
    #[error("{message}")]
    Conflict { field: String, message: String },
    #[error("Something went wrong on our side; it has been logged. Please try again.")]
    Internal,
    /// The request never reached the server function (network, encoding).
    #[error("Could not reach the server: {0}")]
    Transport(String),
}

impl AppError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        AppError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub fn conflict(field: &str, message: impl Into<String>) -> Self {
        AppError::Conflict {
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The message to show next to `field`, if this error is about that field.
    pub fn for_field(&self, name: &str) -> Option<String> {
        match self {
            AppError::Invalid { field, message } | AppError::Conflict { field, message }
                if field == name =>
            {
                Some(message.clone())
            }
            _ => None,
        }
    }

    /// Whether this error is shown next to a field rather than as a banner.
    pub fn is_field_error(&self) -> bool {
        matches!(self, AppError::Invalid { field, .. } | AppError::Conflict { field, .. } if !field.is_empty())
    }

    /// The HTTP status a server function answers with when it returns this error.
    pub fn status(&self) -> u16 {
        match self {
            AppError::Unauthenticated => 401,
            AppError::Forbidden(_) => 403,
            AppError::Invalid { .. } => 422,
            AppError::NotFound(_) => 404,
            AppError::Conflict { .. } => 409,
            AppError::Internal | AppError::Transport(_) => 500,
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}
