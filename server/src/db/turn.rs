//! Write transactions take turns in this process before they ask the database for its write lock.
//!
//! Both engines let one write transaction run at a time (SQLite's lock, our PostgreSQL advisory
//! lock), and SQLite makes the others wait badly: a writer that finds the lock taken sleeps 1, 2,
//! 5, … up to 100 ms between tries, so it wakes well after the lock came free (eleven tries add up
//! to ~300 ms). Here each writer of one process, once it has its connection
//! ([`super::begin_write`]), queues on an async lock, in arrival order, and asks the database
//! only when its turn comes: it gets the lock at once unless another process holds it. Turns are
//! per database (its URL), so every pool on one file (the control pool, the people's, the
//! writes pool, or two replicas in a test) shares them.

use sqlx::{Any, AnyConnection, AnyPool, Transaction};
use std::{
    collections::HashMap,
    ops::{Deref, DerefMut},
    sync::{Arc, LazyLock, Mutex},
    time::Duration,
};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// How long a writer waits for its turn: as long as SQLite's busy timeout, after which it fails as
/// a writer would that found the database locked that long.
pub(super) const TURN_TIMEOUT: Duration = Duration::from_secs(10);

static TURNS: LazyLock<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>> =
    LazyLock::new(Default::default);

/// This process's turn to write on `pool`'s database, once the writers ahead are done.
pub(super) async fn take(pool: &AnyPool) -> Result<OwnedMutexGuard<()>, sqlx::Error> {
    let key = pool.connect_options().database_url.to_string();
    let turns = TURNS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(key)
        .or_default()
        .clone();
    tokio::time::timeout(TURN_TIMEOUT, turns.lock_owned())
        .await
        .map_err(|_| {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "another write transaction held the database for over {} s",
                    TURN_TIMEOUT.as_secs()
                ),
            ))
        })
}

/// A write transaction with its turn: the turn passes on once the transaction has committed or
/// rolled back (or is dropped, which rolls it back).
pub struct WriteTx {
    // Dropped in this order: the transaction, then the turn.
    tx: Transaction<'static, Any>,
    _turn: OwnedMutexGuard<()>,
}

impl WriteTx {
    pub(super) fn new(tx: Transaction<'static, Any>, turn: OwnedMutexGuard<()>) -> WriteTx {
        WriteTx { tx, _turn: turn }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

/// Statements run on the transaction's connection, as on a [`Transaction`]'s.
impl Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

#[cfg(test)]
mod tests {
    use super::super::{begin_write, connect_sized, open};
    use std::time::Duration;

    /// Taking the turn first, a writer on a pool crowded by readers held it while it waited for
    /// a connection, and every writer behind it waited too (a stall on PostgreSQL under load).
    #[tokio::test]
    async fn a_writer_waiting_for_a_connection_holds_no_turn_so_other_writers_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("turns.db").display().to_string();
        open(&url).await.unwrap();
        // Two pools of one connection each on one file: as the people's pool and the control one.
        let crowded = connect_sized(&url, 1, Duration::from_secs(10))
            .await
            .unwrap();
        let control = connect_sized(&url, 1, Duration::from_secs(2))
            .await
            .unwrap();
        let reader = crowded.acquire().await.unwrap();
        let waiting = tokio::spawn({
            let crowded = crowded.clone();
            async move {
                let mut tx = begin_write(&crowded).await?;
                sqlx::query("insert into ledger_cursor (name, through) values ('people', 1)")
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut tx = tokio::time::timeout(Duration::from_secs(2), begin_write(&control))
            .await
            .expect("the writer waiting for a connection does not hold the turn")
            .unwrap();
        sqlx::query("insert into ledger_cursor (name, through) values ('control', 1)")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert!(
            !waiting.is_finished(),
            "the people's writer waits for a connection"
        );
        drop(reader);
        waiting
            .await
            .unwrap()
            .expect("its connection and then its turn came");
        let written: i64 = sqlx::query_scalar("select count(*) from ledger_cursor")
            .fetch_one(&control)
            .await
            .unwrap();
        assert_eq!(written, 2);
    }

    #[tokio::test]
    async fn writers_commit_one_after_another_in_the_order_they_asked() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("turns.db").display().to_string();
        let pool = open(&url).await.unwrap();
        let first = begin_write(&pool).await.unwrap();
        let mut writers = Vec::new();
        for i in 0..4 {
            let pool = pool.clone();
            writers.push(tokio::spawn(async move {
                let mut tx = begin_write(&pool).await?;
                sqlx::query(
                    "insert into ledger_cursor (name, through) \
                     select $1, count(*) from ledger_cursor",
                )
                .bind(format!("w{i}"))
                .execute(&mut *tx)
                .await?;
                tx.commit().await
            }));
            // Each asks after the last has queued behind the first.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        first.commit().await.unwrap();
        for writer in writers {
            writer.await.unwrap().expect("its turn came");
        }
        let order: Vec<(String, i64)> =
            sqlx::query_as("select name, through from ledger_cursor order by through")
                .fetch_all(&pool)
                .await
                .unwrap();
        let expected: Vec<(String, i64)> = (0..4).map(|i| (format!("w{i}"), i)).collect();
        assert_eq!(order, expected);
    }
}
