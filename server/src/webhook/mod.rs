//! The outgoing webhook: the inbox's events as Slack-compatible JSON (`{"text": …}`) POSTed to a
//! URL an admin sets in Settings. Messages go through an outbox table (`webhook_message`) that the
//! leader's dispatcher delivers, retrying with backoff, so a request never waits on the webhook.

pub mod deliver;
pub mod events;

use crate::{settings::repo as settings_repo, users::service::require_admin, ServerError};
use app::model::CurrentUser;
use app::settings::webhook::{Delivery, DeliveryState, WebhookView};
use sqlx::AnyPool;

/// The setting that holds the URL.
pub const URL_KEY: &str = "webhook_url";

/// A URL people may set: `http` or `https`, with a host, at most 2,000 characters.
pub fn parse_url(input: &str) -> Result<Option<reqwest::Url>, ServerError> {
    let input = input.trim();
    if input.is_empty() {
        return Ok(None);
    }
    if input.len() > 2_000 {
        return Err(ServerError::invalid(
            "url",
            "The webhook URL is longer than 2,000 characters.",
        ));
    }
    let url = reqwest::Url::parse(input).map_err(|e| {
        ServerError::invalid(
            "url",
            format!("\"{input}\" is not a URL ({e}); it looks like https://hooks.example.com/…"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ServerError::invalid(
            "url",
            "The webhook URL must start with https:// (or http://) and name a host.",
        ));
    }
    Ok(Some(url))
}

/// What people may read of a URL: its scheme and host (webhook paths carry their secret).
pub fn masked(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}{}/…",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port().map_or(String::new(), |p| format!(":{p}"))
        ),
        Err(_) => "(unreadable)".into(),
    }
}

pub async fn url(pool: &AnyPool) -> Result<Option<String>, ServerError> {
    Ok(settings_repo::value(pool, URL_KEY)
        .await?
        .filter(|u| !u.is_empty()))
}

pub async fn view(pool: &AnyPool, actor: &CurrentUser) -> Result<WebhookView, ServerError> {
    require_webhook_admin(actor)?;
    let rows: Vec<(i64, String, String, i64, Option<String>)> = sqlx::query_as(
        "select created_at, text, state, attempts, last_error from webhook_message
         order by webhook_message_id desc limit 20",
    )
    .fetch_all(pool)
    .await?;
    let deliveries = rows
        .into_iter()
        .map(|(at, text, state, attempts, error)| Delivery {
            at,
            summary: text.lines().next().unwrap_or("").to_string(),
            state: match state.as_str() {
                "sent" => DeliveryState::Sent,
                "failed" => DeliveryState::Failed,
                _ => DeliveryState::Pending,
            },
            attempts: attempts as u32,
            error,
        })
        .collect();
    Ok(WebhookView {
        url: url(pool).await?.map(|u| masked(&u)),
        deliveries,
    })
}

/// Sets (or, empty, removes) the URL: audited with only its masked form. The first URL starts
/// the event cursor at now, so the webhook never replays history.
pub async fn set(
    pool: &AnyPool,
    actor: &CurrentUser,
    input: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<WebhookView, ServerError> {
    require_webhook_admin(actor)?;
    let parsed = parse_url(input)?;
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let mut tx = crate::db::begin_write(pool).await?;
    let before = settings_repo::value(&mut *tx, URL_KEY)
        .await?
        .filter(|u| !u.is_empty());
    let after = parsed.as_ref().map(|u| u.to_string());
    if before != after {
        settings_repo::store(
            &mut tx,
            URL_KEY,
            after.as_deref().unwrap_or(""),
            actor.id,
            now,
        )
        .await?;
        let shown = |u: &Option<String>| u.as_deref().map_or("none".to_string(), masked);
        settings_repo::audit(
            &mut tx,
            URL_KEY,
            &shown(&before),
            &shown(&after),
            reason,
            actor.id,
            now,
        )
        .await?;
        events::start_from_now(&mut tx, now).await?;
    }
    tx.commit().await?;
    view(pool, actor).await
}

/// Sends a test message now (not retried) and records how it went.
pub async fn test(
    pool: &AnyPool,
    actor: &CurrentUser,
    now: i64,
) -> Result<WebhookView, ServerError> {
    require_webhook_admin(actor)?;
    let Some(target) = url(pool).await? else {
        return Err(ServerError::invalid(
            "url",
            "There is no webhook URL to test: save one first.",
        ));
    };
    let text = format!("Hourglass: a test message from {}.", actor.username);
    // Sent before it is written down: a row pending meanwhile would be due to the outbox's own
    // round too, which then sent it a second time.
    let outcome = deliver::post(&deliver::client(), &target, &text).await;
    deliver::record_once(pool, &text, outcome, now).await?;
    view(pool, actor).await
}

fn require_webhook_admin(actor: &CurrentUser) -> Result<(), ServerError> {
    require_admin(actor).map_err(|_| {
        ServerError::Forbidden("Only administrators can see or change the webhook.".into())
    })
}
