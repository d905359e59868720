//! A JSON body extractor whose rejection is the app's own error, naming the field when it can.

use crate::ServerError;
use axum::{
    extract::{rejection::JsonRejection, FromRequest, Request},
    Json,
};
use serde::de::DeserializeOwned;

pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ServerError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(describe(rejection)),
        }
    }
}

fn describe(rejection: JsonRejection) -> ServerError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return crate::guard::body_limit::too_large(
            crate::guard::body_limit::DEFAULT_LIMIT,
            "a request",
        );
    }
    let text = rejection.body_text();
    // serde names the field in backticks: "missing field `gpus`", "unknown field `x`".
    let field = text
        .split('`')
        .nth(1)
        .filter(|_| text.contains("field"))
        .unwrap_or("body");
    let field: &'static str = match field {
        "project" => "project",
        "name" => "name",
        "command" => "command",
        "gpus" => "gpus",
        "min_runtime_s" => "min_runtime_s",
        "resumable" => "resumable",
        "priority" => "priority",
        "comment" => "comment",
        _ => "body",
    };
    let message = text.split(": ").last().unwrap_or(&text).to_string();
    ServerError::invalid(field, format!("The request body is not valid: {message}"))
}
