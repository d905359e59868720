//! Write transactions take turns in this process before they ask the database for its write lock.
//!
//! Both engines let one write transaction run at a time (SQLite's lock, our PostgreSQL advisory
//! lock), and both make the others wait badly: a SQLite writer that finds the lock taken sleeps
//! 1, 2, 5, … up to 100 ms between tries, so it wakes well after the lock came free (eleven tries
//! add up to ~300 ms); a PostgreSQL writer waits holding one of its pool's few connections. Here
//! the writers of one process queue on an async lock first, in arrival order, and each asks the
//! database only when its turn comes: it gets the lock at once unless another process holds it.
//! Turns are per database (its URL), so two pools on one file (the control pool and the main one,
//! or two replicas in a test) share them.

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

    #[tokio::test]
    async fn a_writer_waiting_for_its_turn_holds_no_connection_so_reads_on_its_pool_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("turns.db").display().to_string();
        open(&url).await.unwrap();
        // Two pools of one connection each on one file: as the control pool and the main one.
        let first = connect_sized(&url, 1, Duration::from_secs(2))
            .await
            .unwrap();
        let second = connect_sized(&url, 1, Duration::from_secs(2))
            .await
            .unwrap();
        let holding = begin_write(&first).await.unwrap();
        let waiting = tokio::spawn({
            let second = second.clone();
            async move {
                let mut tx = begin_write(&second).await?;
                sqlx::query("insert into ledger_cursor (name, through) values ('turn', 1)")
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Were the waiting writer asking the database for its lock, it would hold the second
        // pool's only connection and this read would time out.
        let written: i64 =
            sqlx::query_scalar("select count(*) from ledger_cursor where name = 'turn'")
                .fetch_one(&second)
                .await
                .expect("a read while a writer waits its turn");
        assert_eq!(written, 0);
        assert!(
            !waiting.is_finished(),
            "the second writer waits for the first"
        );
        holding.commit().await.unwrap();
        waiting.await.unwrap().expect("its turn came");
        let written: i64 =
            sqlx::query_scalar("select count(*) from ledger_cursor where name = 'turn'")
                .fetch_one(&second)
                .await
                .unwrap();
        assert_eq!(written, 1);
    }
}
