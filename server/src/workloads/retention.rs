//! Retention: how long a finished workload keeps its output and its event timeline.
//!
//! A year of a large cluster leaves millions of workloads behind. Their rows (what ran, for whom,
//! for how long) stay: the reports and a person's history read them. Their output (up to a MiB
//! each) is cleared `output_days` after the workload ended, and their events `event_days` after,
//! except preemptions and drains: those are what the reports count, and the reason a person may
//! still ask about. The workload remembers when each was removed, so its page can say so.
//!
//! The leader prunes in the background, a few hours of ended workloads per write transaction, so
//! that no pass, heartbeat or submission waits long behind it; a cursor per kind remembers how far
//! it got, so each ended workload is visited once.

use crate::ServerError;
use scheduler::{DAY, HOUR};
use sqlx::AnyPool;

/// How long finished workloads keep their output and events (settings `output_retention_days`
/// and `event_retention_days`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub output_days: u32,
    pub event_days: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            output_days: 30,
            event_days: 180,
        }
    }
}

/// What one pruning step removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Workloads whose output was cleared.
    pub outputs: u64,
    /// Events deleted.
    pub events: u64,
    /// Whether everything due is done (`false`: call again).
    pub caught_up: bool,
}

/// Ended workloads handled per write transaction, at most (by ended time: this many hours).
const SPAN: i64 = 6 * HOUR;
/// Transactions per step, so that one step stays short.
const SPANS_PER_STEP: usize = 40;

/// One bounded step of pruning as of `now`.
pub async fn prune_step(
    pool: &AnyPool,
    retention: &Retention,
    now: i64,
) -> Result<Pruned, ServerError> {
    let mut pruned = Pruned {
        caught_up: true,
        ..Pruned::default()
    };
    for kind in [Kind::Output, Kind::Events] {
        let days = match kind {
            Kind::Output => retention.output_days,
            Kind::Events => retention.event_days,
        };
        let cutoff = now - i64::from(days) * DAY;
        let mut reached = false;
        for _ in 0..SPANS_PER_STEP {
            let mut tx = crate::db::begin_write(pool).await?;
            let from = match cursor(&mut tx, kind).await? {
                Some(through) => through,
                // The first time: from the oldest ended workload.
                None => sqlx::query_scalar::<_, Option<i64>>("select min(ended_at) from workload")
                    .fetch_one(&mut *tx)
                    .await?
                    .unwrap_or(cutoff),
            };
            if from >= cutoff {
                tx.rollback().await?;
                reached = true;
                break;
            }
            let to = (from + SPAN).min(cutoff);
            let removed = match kind {
                Kind::Output => sqlx::query(
                    "update workload set log_tail = '', output_removed_at = $3
                     where ended_at >= $1 and ended_at < $2 and output_removed_at is null",
                )
                .bind(from)
                .bind(to)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected(),
                Kind::Events => {
                    let deleted = sqlx::query(
                        "delete from workload_event where kind not in ('preempted', 'drained')
                         and workload_id in (select workload_id from workload
                                             where ended_at >= $1 and ended_at < $2)",
                    )
                    .bind(from)
                    .bind(to)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    sqlx::query(
                        "update workload set events_removed_at = $3
                         where ended_at >= $1 and ended_at < $2 and events_removed_at is null",
                    )
                    .bind(from)
                    .bind(to)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    deleted
                }
            };
            set_cursor(&mut tx, kind, to).await?;
            tx.commit().await?;
            match kind {
                Kind::Output => pruned.outputs += removed,
                Kind::Events => pruned.events += removed,
            }
        }
        // Out of spans before reaching the cutoff: the next step goes on from the cursor.
        pruned.caught_up &= reached;
    }
    Ok(pruned)
}

/// Every step until caught up (the load test's year at once; the leader steps in the background).
pub async fn prune_all(
    pool: &AnyPool,
    retention: &Retention,
    now: i64,
) -> Result<Pruned, ServerError> {
    let mut total = Pruned::default();
    loop {
        let step = prune_step(pool, retention, now).await?;
        total.outputs += step.outputs;
        total.events += step.events;
        if step.caught_up {
            total.caught_up = true;
            return Ok(total);
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Output,
    Events,
}

impl Kind {
    fn cursor_name(self) -> &'static str {
        match self {
            Kind::Output => "output_pruned",
            Kind::Events => "events_pruned",
        }
    }
}

async fn cursor(db: &mut sqlx::AnyConnection, kind: Kind) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("select through from ledger_cursor where name = $1")
        .bind(kind.cursor_name())
        .fetch_optional(db)
        .await
}

async fn set_cursor(
    db: &mut sqlx::AnyConnection,
    kind: Kind,
    through: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into ledger_cursor (name, through) values ($1, $2)
         on conflict (name) do update set through = excluded.through",
    )
    .bind(kind.cursor_name())
    .bind(through)
    .execute(db)
    .await?;
    Ok(())
}
