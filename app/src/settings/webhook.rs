//! The outgoing webhook: where notifications go besides the inbox (admins set it in Settings).

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The webhook as the Settings page shows it: its URL with the secret part hidden, and the
/// latest deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookView {
    /// `https://hooks.example.com/…`: scheme and host only (webhook paths are secrets).
    pub url: Option<String>,
    pub deliveries: Vec<Delivery>,
}

/// One message the webhook carried, or tries to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub at: i64,
    /// Its first line.
    pub summary: String,
    pub state: DeliveryState,
    pub attempts: u32,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryState {
    Pending,
    Sent,
    Failed,
}

impl DeliveryState {
    pub fn label(self) -> &'static str {
        match self {
            DeliveryState::Pending => "retrying",
            DeliveryState::Sent => "sent",
            DeliveryState::Failed => "failed",
        }
    }
}

#[server(name = GetWebhook, prefix = "/api", endpoint = "settings/webhook")]
pub async fn get_webhook() -> Result<WebhookView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.webhook(&require_user()?).await }.await)
}

/// Sets the webhook's URL (empty: no webhook), with the admin's reason for the history.
#[server(name = SetWebhook, prefix = "/api", endpoint = "settings/webhook/set")]
pub async fn set_webhook(
    url: String,
    #[server(default)] reason: Option<String>,
) -> Result<WebhookView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.set_webhook(&require_user()?, url, reason).await }.await)
}

/// Sends a test message now and says how it went.
#[server(name = TestWebhook, prefix = "/api", endpoint = "settings/webhook/test")]
pub async fn test_webhook() -> Result<WebhookView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.test_webhook(&require_user()?).await }.await)
}
