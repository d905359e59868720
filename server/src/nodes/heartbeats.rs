//! Agents' heartbeats, written to the database in batches.
//!
//! Every agent sync says its node is alive. Written one by one, that was a write transaction per
//! sync — over a hundred a second with a thousand agents, each waiting its turn for SQLite's write
//! lock behind the scheduler's passes and the submissions (sqlx's statement log at 10,000 queued:
//! the costliest statement of all, 10 ms on average). Now a sync from a node already known to be
//! alive notes the moment in memory, and the moments noted are written in one statement: by the
//! leader's next pass, before it looks for silent nodes, or at the latest [`WRITE_WITHIN`] after
//! the first was noted, by whichever replica noted it. A node that is down, never heard from, or
//! whose stored heartbeat is half-way to the deadline is written at once, as before.
//!
//! A sync also needs a number that orders it after every earlier sync of its node (only a node's
//! newest sync hands out runs, see `agent::repo::next_answer`). It used to come from a counter
//! on the node's row, bumped by that same write; it is now the microseconds since the epoch at
//! which the sync arrived, made strictly increasing within this process ([`Heartbeats::sync_number`]).

use crate::{nodes::repo, ServerError};
use sqlx::AnyPool;
use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// The longest a noted heartbeat waits to be written.
pub const WRITE_WITHIN: Duration = Duration::from_secs(1);

/// Heartbeats noted and not yet written, by node, and the sync numbers this process gave out.
#[derive(Clone, Default)]
pub struct Heartbeats {
    inner: Arc<Mutex<Pending>>,
}

#[derive(Default)]
struct Pending {
    /// The latest moment each node spoke (epoch seconds on the runtime's clock).
    at: BTreeMap<i64, i64>,
    /// A write is scheduled within [`WRITE_WITHIN`].
    scheduled: bool,
    last_number: i64,
}

/// Whether a sync's heartbeat must be written before the sync goes on.
pub fn write_at_once(down: bool, stored: Option<i64>, now: i64, heartbeat_deadline: i64) -> bool {
    down || stored.is_none_or(|at| now - at >= heartbeat_deadline / 2)
}

impl Heartbeats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A number for a sync arriving now, greater than any this process gave before: microseconds
    /// since the epoch (so a sync on another replica a moment later gets a greater one too).
    pub fn sync_number(&self) -> i64 {
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let mut pending = self.lock();
        pending.last_number = micros.max(pending.last_number + 1);
        pending.last_number
    }

    /// Notes that `node` spoke at `at`, to be written within [`WRITE_WITHIN`] through `pool`.
    pub fn note(&self, pool: &AnyPool, node: i64, at: i64) {
        let schedule = {
            let mut pending = self.lock();
            let kept = pending.at.entry(node).or_insert(at);
            *kept = (*kept).max(at);
            !std::mem::replace(&mut pending.scheduled, true)
        };
        if schedule {
            let (heartbeats, pool) = (self.clone(), pool.clone());
            tokio::spawn(async move {
                tokio::time::sleep(WRITE_WITHIN).await;
                heartbeats.lock().scheduled = false;
                if let Err(error) = heartbeats.write_now(&pool).await {
                    tracing::warn!(%error, "could not write the agents' heartbeats; trying again at the next one");
                }
            });
        }
    }

    /// What is noted and not yet written, as `(node, at)`.
    pub fn pending(&self) -> Vec<(i64, i64)> {
        self.lock().at.iter().map(|(&n, &at)| (n, at)).collect()
    }

    /// `written` is in the database: forgets each of them not noted again since.
    pub fn written(&self, written: &[(i64, i64)]) {
        let mut pending = self.lock();
        for &(node, at) in written {
            if pending.at.get(&node) == Some(&at) {
                pending.at.remove(&node);
            }
        }
    }

    /// Writes everything noted, in one transaction of its own.
    pub async fn write_now(&self, pool: &AnyPool) -> Result<usize, ServerError> {
        let batch = self.pending();
        if batch.is_empty() {
            return Ok(0);
        }
        let mut tx = crate::db::begin_write(pool).await?;
        repo::write_heartbeats(&mut tx, &batch).await?;
        tx.commit().await?;
        self.written(&batch);
        Ok(batch.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_number_is_greater_than_every_one_before_it() {
        let heartbeats = Heartbeats::default();
        let numbers: Vec<i64> = (0..1_000).map(|_| heartbeats.sync_number()).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]));
        // Microseconds since the epoch: later than any counter a node's row held before.
        assert!(numbers[0] > 1_700_000_000_000_000);
    }

    #[test]
    fn a_heartbeat_is_written_at_once_when_the_node_is_down_unknown_or_half_way_to_the_deadline() {
        assert!(write_at_once(true, Some(100), 100, 30));
        assert!(write_at_once(false, None, 100, 30));
        assert!(write_at_once(false, Some(85), 100, 30));
        assert!(!write_at_once(false, Some(86), 100, 30));
    }

    #[test]
    fn a_write_forgets_only_what_was_not_noted_again_meanwhile() {
        let heartbeats = Heartbeats::default();
        {
            let mut pending = heartbeats.lock();
            pending.at.insert(1, 10);
            pending.at.insert(2, 10);
        }
        let batch = heartbeats.pending();
        heartbeats.lock().at.insert(2, 11);
        heartbeats.written(&batch);
        assert_eq!(heartbeats.pending(), vec![(2, 11)]);
    }
}
