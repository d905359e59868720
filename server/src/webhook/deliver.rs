//! Delivery: the leader reads new events into the outbox every few seconds and POSTs what is
//! due. A failed POST is tried again after a backoff (backon's exponential schedule, kept in the
//! message's `next_at`, so it survives a restart or a change of leader), at most [`MAX_ATTEMPTS`]
//! times in all.

use crate::runtime::Runtime;
use crate::ServerError;
use backon::{BackoffBuilder, ExponentialBuilder};
use sqlx::{AnyExecutor, AnyPool};
use std::time::Duration;

pub const MAX_ATTEMPTS: u32 = 5;

/// The HTTP client: short timeouts, no redirects (a webhook that moved is a setting to fix).
pub fn client() -> reqwest::Client {
    crate::agent::client::install_tls_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client with only timeouts set builds")
}

/// Adds a message to the outbox, due now.
pub async fn enqueue(db: impl AnyExecutor<'_>, text: &str, now: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "insert into webhook_message (created_at, text, state, attempts, next_at)
         values ($1, $2, 'pending', 0, $1) returning webhook_message_id",
    )
    .bind(now)
    .bind(text)
    .fetch_one(db)
    .await
}

/// POSTs `{"text": …}`; an error names what went wrong.
pub async fn post(client: &reqwest::Client, url: &str, text: &str) -> Result<(), String> {
    let response = client
        .post(url)
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "no answer within 10 s".to_string()
            } else if e.is_connect() {
                "could not connect".to_string()
            } else {
                format!("the request failed: {e}")
            }
        })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the webhook answered {status}"))
    }
}

/// The wait before attempt `attempts + 1`, after `attempts` failed: 2 s, 4 s, … at most 32 s.
pub fn backoff(attempts: u32) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(2))
        .with_max_delay(Duration::from_secs(32))
        .with_factor(2.0)
        .without_max_times()
        .build()
        .nth(attempts.saturating_sub(1) as usize)
        .unwrap_or(Duration::from_secs(32))
}

/// Records attempt number `attempt` of a message: sent, due again after a backoff, or failed
/// for good after [`MAX_ATTEMPTS`].
pub async fn record(
    pool: &AnyPool,
    id: i64,
    outcome: Result<(), String>,
    now: i64,
    attempt: u32,
) -> Result<(), sqlx::Error> {
    let (state, error, next_at) = match outcome {
        Ok(()) => ("sent", None, now),
        Err(e) if attempt >= MAX_ATTEMPTS => ("failed", Some(e), now),
        Err(e) => ("pending", Some(e), now + backoff(attempt).as_secs() as i64),
    };
    sqlx::query(
        "update webhook_message set state = $1, attempts = $2, last_error = $3, next_at = $4,
            sent_at = case when $1 = 'sent' then $5 else sent_at end
         where webhook_message_id = $6",
    )
    .bind(state)
    .bind(i64::from(attempt))
    .bind(error)
    .bind(next_at)
    .bind(now)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Writes down a message sent once, outside the outbox's rounds: sent, or failed (not retried).
pub async fn record_once(
    pool: &AnyPool,
    text: &str,
    outcome: Result<(), String>,
    now: i64,
) -> Result<(), sqlx::Error> {
    let (state, error) = match outcome {
        Ok(()) => ("sent", None),
        Err(e) => ("failed", Some(e)),
    };
    sqlx::query(
        "insert into webhook_message (created_at, text, state, attempts, next_at, last_error,
            sent_at)
         values ($1, $2, $3, 1, $1, $4, case when $3 = 'sent' then $1 end)",
    )
    .bind(now)
    .bind(text)
    .bind(state)
    .bind(error)
    .execute(pool)
    .await?;
    Ok(())
}

/// One round: new events into the outbox, then every due message POSTed once.
pub async fn pass(pool: &AnyPool, client: &reqwest::Client, now: i64) -> Result<(), ServerError> {
    let Some(url) = super::url(pool).await? else {
        return Ok(());
    };
    super::events::collect_now(pool, now).await?;
    let due: Vec<(i64, String, i64)> = sqlx::query_as(
        "select webhook_message_id, text, attempts from webhook_message
         where state = 'pending' and next_at <= $1 order by webhook_message_id limit 20",
    )
    .bind(now)
    .fetch_all(pool)
    .await?;
    for (id, text, attempts) in due {
        let outcome = post(client, &url, &text).await;
        if let Err(error) = &outcome {
            tracing::warn!(message = id, %error, "webhook delivery failed");
        }
        record(pool, id, outcome, now, attempts as u32 + 1).await?;
    }
    Ok(())
}

/// Runs [`pass`] every `every` on the replica that leads (a follower's would send twice).
pub fn spawn(pool: AnyPool, runtime: Runtime, every: Duration) {
    tokio::spawn(async move {
        let client = client();
        loop {
            tokio::time::sleep(every).await;
            if !runtime.is_leader() {
                continue;
            }
            if let Err(error) = pass(&pool, &client, runtime.now()).await {
                tracing::warn!(%error, "webhook pass failed");
            }
        }
    });
}
