//! The in-app inbox, built from what the database already records: change requests waiting for
//! a person's decision, decisions on their proposals, and their workloads' preemptions, drains and
//! failures. Nothing is stored per notification; only when each person last read their inbox.

use app::budget::ChangeState;
use app::inbox::{Inbox, InboxItem, InboxKind, NavCounts};
use app::model::CurrentUser;
use app::workloads::reasons::Event;
use app::workloads::sentences;
use sqlx::AnyPool;

use crate::budget::changes;
use crate::ServerError;

/// How far back the inbox looks.
pub const LOOKBACK_S: i64 = 30 * 24 * 3600;
/// At most this many notifications are listed.
const MAX_ITEMS: usize = 100;

/// A workload event worth telling its owner about, as stored.
#[derive(sqlx::FromRow)]
struct EventRow {
    workload_id: i64,
    name: String,
    at: i64,
    kind: String,
    detail: String,
}

/// A decided change request proposed by the reader and decided by someone else.
#[derive(sqlx::FromRow)]
struct DecisionRow {
    change_request_id: i64,
    path: String,
    state: String,
    decided_at: i64,
    decided_by: String,
    decision_comment: String,
    /// The cluster the request is for alone (none: every cluster).
    cluster: Option<String>,
}

/// The workload events owners are told about. A workload's events come no later than its end,
/// so the queries skip the owner's workloads that ended before the period without reading their
/// events.
const TOLD: &str = "('preempted', 'drained', 'failed')";

pub async fn inbox(pool: &AnyPool, actor: &CurrentUser, now: i64) -> Result<Inbox, ServerError> {
    let seen = seen_at(pool, actor.id).await?;
    let since = now - LOOKBACK_S;
    let mut items = Vec::new();
    for r in awaiting(pool, actor).await? {
        items.push(InboxItem {
            at: r.created_at,
            kind: InboxKind::Approval,
            title: format!(
                "Change request #{} on {}{}",
                r.id,
                r.node,
                cluster_only(r.cluster.as_deref())
            ),
            sentence: format!(
                "{} proposes new shares for the children of {}: \u{201c}{}\u{201d} It waits for your decision.",
                r.proposer, r.node, r.justification
            ),
            href: "/approvals".into(),
            unread: false,
        });
    }
    let decisions: Vec<DecisionRow> = sqlx::query_as(
        "select r.change_request_id, b.path, r.state, r.decided_at, d.username as decided_by,
            r.decision_comment, c.name as cluster
         from change_request r join budget_node b on b.budget_node_id = r.budget_node_id
         join \"user\" d on d.user_id = r.decided_by
         left join cluster c on c.cluster_id = r.cluster_id
         where r.proposer_id = $1 and r.decided_by <> $1 and r.decided_at >= $2
           and r.state in ('scheduled', 'applied', 'rejected')
         order by r.decided_at desc limit 100",
    )
    .bind(actor.id)
    .bind(since)
    .fetch_all(pool)
    .await?;
    for d in decisions {
        items.push(InboxItem {
            at: d.decided_at,
            kind: InboxKind::Decision,
            title: format!(
                "Change request #{} on {}{}",
                d.change_request_id,
                d.path,
                cluster_only(d.cluster.as_deref())
            ),
            sentence: decision_sentence(&d.state, &d.decided_by, &d.decision_comment),
            href: "/approvals".into(),
            unread: false,
        });
    }
    let events: Vec<EventRow> = sqlx::query_as(&format!(
        "select w.workload_id, w.name, e.at, e.kind, e.detail
         from workload w join workload_event e on e.workload_id = w.workload_id
         where w.user_id = $1 and (w.ended_at is null or w.ended_at >= $2)
           and e.kind in {TOLD} and e.at >= $2
         order by e.at desc, e.workload_event_id desc limit 100"
    ))
    .bind(actor.id)
    .bind(since)
    .fetch_all(pool)
    .await?;
    for e in events {
        let event = Event::from_parts(&e.kind, &e.detail)
            .map_err(|error| sqlx::Error::Decode(Box::new(error)))?;
        let (kind, sentence) = event_sentence(&event, now);
        items.push(InboxItem {
            at: e.at,
            kind,
            title: format!("{} (workload {})", e.name, e.workload_id),
            sentence,
            href: format!("/workloads/{}", e.workload_id),
            unread: false,
        });
    }
    items.sort_by_key(|i| std::cmp::Reverse(i.at));
    items.truncate(MAX_ITEMS);
    for item in &mut items {
        item.unread = seen.is_none_or(|seen| item.at > seen);
    }
    let unread = items.iter().filter(|i| i.unread).count();
    Ok(Inbox { items, unread })
}

/// The navigation's counts, without building the inbox: every page's header asks for them.
pub async fn nav_counts(
    pool: &AnyPool,
    actor: &CurrentUser,
    now: i64,
) -> Result<NavCounts, ServerError> {
    let waiting = awaiting(pool, actor).await?;
    let after = seen_at(pool, actor.id)
        .await?
        .unwrap_or(i64::MIN)
        .max(now - LOOKBACK_S - 1);
    let new_requests = waiting.iter().filter(|r| r.created_at > after).count();
    let decisions: i64 = sqlx::query_scalar(
        "select count(*) from change_request
         where proposer_id = $1 and decided_by <> $1 and decided_at > $2
           and state in ('scheduled', 'applied', 'rejected')",
    )
    .bind(actor.id)
    .bind(after)
    .fetch_one(pool)
    .await?;
    let events: i64 = sqlx::query_scalar(&format!(
        "select count(*) from workload w join workload_event e on e.workload_id = w.workload_id
         where w.user_id = $1 and (w.ended_at is null or w.ended_at > $2)
           and e.kind in {TOLD} and e.at > $2"
    ))
    .bind(actor.id)
    .bind(after)
    .fetch_one(pool)
    .await?;
    let unread = new_requests + decisions as usize + events as usize;
    Ok(NavCounts {
        awaiting: waiting.len(),
        unread: unread.min(MAX_ITEMS),
    })
}

/// Everything so far counts as read.
pub async fn mark_read(pool: &AnyPool, actor: &CurrentUser, now: i64) -> Result<(), ServerError> {
    sqlx::query("update \"user\" set inbox_seen_at = $1 where user_id = $2")
        .bind(now)
        .bind(actor.id)
        .execute(pool)
        .await?;
    Ok(())
}

async fn seen_at(pool: &AnyPool, user_id: i64) -> Result<Option<i64>, ServerError> {
    Ok(
        sqlx::query_scalar("select inbox_seen_at from \"user\" where user_id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?
            .flatten(),
    )
}

/// The change requests `actor` may decide now.
async fn awaiting(
    pool: &AnyPool,
    actor: &CurrentUser,
) -> Result<Vec<app::budget::ChangeRequestView>, ServerError> {
    let pending = changes::list(pool, actor, Some(ChangeState::Pending), None).await?;
    Ok(pending.into_iter().filter(|r| r.can_decide).collect())
}

/// " on cluster west only" for a request made for one cluster alone, as the Approvals page says;
/// nothing for one made for every cluster.
pub fn cluster_only(cluster: Option<&str>) -> String {
    cluster.map_or(String::new(), |c| format!(" on cluster {c} only"))
}

/// A decision on a request, in words: who, what it means, and their comment.
pub fn decision_sentence(state: &str, by: &str, comment: &str) -> String {
    let what = match state {
        "rejected" => format!("{by} rejected it; the shares stay as they were."),
        "scheduled" => {
            format!("{by} approved it; the new shares take effect on its effective date.")
        }
        _ => format!("{by} approved it; the new shares are in effect."),
    };
    if comment.trim().is_empty() {
        what
    } else {
        format!("{what} Their comment: \u{201c}{}\u{201d}", comment.trim())
    }
}

/// A stopping event in its owner's words, with the reason sentence the workload's page shows.
pub fn event_sentence(event: &Event, now: i64) -> (InboxKind, String) {
    match event {
        Event::Failed { exit_code, note } => {
            let code = exit_code.map_or(String::new(), |c| format!(" with exit code {c}"));
            let note = note.as_deref().map_or(String::new(), |n| format!(": {n}"));
            (InboxKind::Failed, format!("It failed{code}{note}."))
        }
        other => (
            InboxKind::Preempted,
            sentences::stop_reason(other, now).unwrap_or_else(|| "It was stopped.".into()),
        ),
    }
}
