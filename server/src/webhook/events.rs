//! What the webhook carries: the inbox's events since a cursor, as lines of one message.

use crate::inbox::{cluster_only, decision_sentence, event_sentence};
use crate::ServerError;
use app::workloads::reasons::Event;
use sqlx::{AnyConnection, AnyPool};

/// Decisions are read this many seconds behind now, so one committed late in its second is not
/// skipped (events and requests are read by id, which needs no lag).
const DECISION_LAG_S: i64 = 5;
/// At most this many lines in one message; the rest are counted.
const MAX_LINES: usize = 30;

/// How far the webhook has read.
#[derive(Debug, Clone, Copy, PartialEq, sqlx::FromRow)]
pub struct Cursor {
    pub event_id: i64,
    pub request_id: i64,
    pub decided_at: i64,
}

/// Starts (or restarts) reading at now: what happened before is not sent.
pub async fn start_from_now(db: &mut AnyConnection, now: i64) -> Result<(), sqlx::Error> {
    let (event_id, request_id) = newest_ids(&mut *db).await?;
    sqlx::query(
        "insert into webhook_cursor (webhook_cursor_id, event_id, request_id, decided_at)
         values (1, $1, $2, $3)
         on conflict (webhook_cursor_id) do update set event_id = excluded.event_id,
         request_id = excluded.request_id, decided_at = excluded.decided_at",
    )
    .bind(event_id)
    .bind(request_id)
    .bind(now - DECISION_LAG_S)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// The newest workload event's and change request's ids (0 for none).
async fn newest_ids(db: &mut AnyConnection) -> Result<(i64, i64), sqlx::Error> {
    let event: i64 =
        sqlx::query_scalar("select coalesce(max(workload_event_id), 0) from workload_event")
            .fetch_one(&mut *db)
            .await?;
    let request: i64 =
        sqlx::query_scalar("select coalesce(max(change_request_id), 0) from change_request")
            .fetch_one(&mut *db)
            .await?;
    Ok((event, request))
}

pub async fn cursor(db: &mut AnyConnection) -> Result<Option<Cursor>, sqlx::Error> {
    sqlx::query_as("select event_id, request_id, decided_at from webhook_cursor")
        .fetch_optional(db)
        .await
}

async fn save(db: &mut AnyConnection, c: Cursor) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update webhook_cursor set event_id = $1, request_id = $2, decided_at = $3
         where webhook_cursor_id = 1",
    )
    .bind(c.event_id)
    .bind(c.request_id)
    .bind(c.decided_at)
    .execute(db)
    .await?;
    Ok(())
}

/// Reads what happened since the cursor, moves it, and returns the message to send (if any).
pub async fn collect(db: &mut AnyConnection, now: i64) -> Result<Option<String>, ServerError> {
    let Some(mut at) = cursor(&mut *db).await? else {
        start_from_now(db, now).await?;
        return Ok(None);
    };
    let mut lines = Vec::new();

    // The newest ids first, then what lies between the cursor and them: an event or request
    // committed while this runs is read on the next pass rather than skipped.
    let (last_event, last_request) = newest_ids(&mut *db).await?;
    let events: Vec<(i64, String, String, i64, String, String)> = sqlx::query_as(
        "select e.workload_event_id, e.kind, e.detail, w.workload_id, w.name, u.username
         from workload_event e join workload w on w.workload_id = e.workload_id
         join \"user\" u on u.user_id = w.user_id
         where e.workload_event_id > $1 and e.workload_event_id <= $2
           and e.kind in ('preempted', 'drained', 'failed')
         order by e.workload_event_id limit 500",
    )
    .bind(at.event_id)
    .bind(last_event)
    .fetch_all(&mut *db)
    .await?;
    // Past 500, the rest are read on the next pass.
    at.event_id = if events.len() == 500 {
        events.last().map_or(at.event_id, |e| e.0)
    } else {
        last_event.max(at.event_id)
    };
    for (_, kind, detail, id, name, owner) in events {
        let event = Event::from_parts(&kind, &detail)
            .map_err(|error| sqlx::Error::Decode(Box::new(error)))?;
        let (kind, sentence) = event_sentence(&event, now);
        lines.push(format!(
            "{} workload {name} (#{id}) of {owner}: {sentence}",
            kind.label()
        ));
    }

    let requests: Vec<(i64, String, String, String, Option<String>)> = sqlx::query_as(
        "select r.change_request_id, b.path, p.username, r.justification, c.name
         from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
         join \"user\" p on p.user_id = r.proposer_id
         left join cluster c on c.cluster_id = r.cluster_id
         where r.change_request_id > $1 and r.change_request_id <= $2 and r.state = 'pending'
         order by r.change_request_id",
    )
    .bind(at.request_id)
    .bind(last_request)
    .fetch_all(&mut *db)
    .await?;
    at.request_id = last_request.max(at.request_id);
    for (id, path, proposer, why, cluster) in requests {
        let only = cluster_only(cluster.as_deref());
        lines.push(format!(
            "Change request #{id} on {path}{only} waits for a decision of its owners: {proposer} proposes new shares: \u{201c}{why}\u{201d}"
        ));
    }

    let until = now - DECISION_LAG_S;
    if until > at.decided_at {
        type Decided = (i64, String, String, String, String, String, Option<String>);
        let decided: Vec<Decided> = sqlx::query_as(
            "select r.change_request_id, b.path, p.username, r.state, d.username,
                r.decision_comment, c.name
             from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
             join \"user\" p on p.user_id = r.proposer_id
             join \"user\" d on d.user_id = r.decided_by
             left join cluster c on c.cluster_id = r.cluster_id
             where r.decided_at > $1 and r.decided_at <= $2
               and r.state in ('scheduled', 'applied', 'rejected')
             order by r.decided_at, r.change_request_id",
        )
        .bind(at.decided_at)
        .bind(until)
        .fetch_all(&mut *db)
        .await?;
        at.decided_at = until;
        for (id, path, proposer, state, by, comment, cluster) in decided {
            lines.push(format!(
                "Change request #{id} on {path}{} (proposed by {proposer}): {}",
                cluster_only(cluster.as_deref()),
                decision_sentence(&state, &by, &comment)
            ));
        }
    }
    save(db, at).await?;
    Ok(message(&lines))
}

/// One message for a pass's lines: a single line as it is, several under a count.
pub fn message(lines: &[String]) -> Option<String> {
    match lines {
        [] => None,
        [one] => Some(format!("Hourglass: {one}")),
        many => {
            let mut text = format!("Hourglass: {} notifications", many.len());
            for line in many.iter().take(MAX_LINES) {
                text.push_str("\n• ");
                text.push_str(line);
            }
            if many.len() > MAX_LINES {
                text.push_str(&format!(
                    "\n… and {} more (see each person's inbox)",
                    many.len() - MAX_LINES
                ));
            }
            Some(text)
        }
    }
}

/// The pool's variant, for tests and the dispatcher.
pub async fn collect_now(pool: &AnyPool, now: i64) -> Result<Option<String>, ServerError> {
    let mut tx = crate::db::begin_write(pool).await?;
    let text = collect(&mut tx, now).await?;
    if let Some(text) = &text {
        super::deliver::enqueue(&mut *tx, text, now).await?;
    }
    tx.commit().await?;
    Ok(text)
}
