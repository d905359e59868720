//! The scheduler lease (DESIGN §8): several `hourglass serve` replicas may share one database;
//! exactly one — the holder of an unexpired lease — runs decision passes. Every pass claims or
//! renews the lease inside its own serialized write transaction, so a replica that lost the lease
//! (paused, partitioned, killed mid-pass) can never apply a decision after another took over:
//! its claim fails and its transaction rolls back (fencing). A killed leader's lease expires
//! after [`TTL_MS`]; a follower claims it on its next try.

use super::repo;
use crate::ServerError;
use sqlx::{Any, AnyPool, Transaction};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::OnceLock;

/// How long a claim lasts without renewal.
pub const TTL_MS: i64 = 5_000;
/// How often the leader renews and followers try to claim (well inside [`TTL_MS`]).
pub const RENEW_MS: u64 = 1_000;

/// This process's name as a lease holder: replicas are processes, so a runtime restarted inside
/// the same process keeps the lease.
pub fn holder() -> &'static str {
    static HOLDER: OnceLock<String> = OnceLock::new();
    HOLDER.get_or_init(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
        let nanos = crate::clock::Clock::entropy() as u32;
        format!("{host}:{}:{nanos:08x}", std::process::id())
    })
}

/// The lease is shared between processes, so it keeps the system's time even where a test has
/// fixed a runtime's clock.
pub fn now_ms() -> i64 {
    crate::clock::Clock::system().now_ms()
}

/// What this replica knows of its own standing.
#[derive(Default)]
pub struct Standing {
    /// When this replica's last successful claim expires (ms); 0 if it holds none.
    expires_at_ms: AtomicI64,
    epoch: AtomicI64,
    /// A wake-up for the leader is being written.
    wake_pending: AtomicBool,
}

impl Standing {
    pub fn is_leader(&self) -> bool {
        self.expires_at_ms.load(Ordering::Relaxed) > now_ms()
    }

    pub fn epoch(&self) -> i64 {
        self.epoch.load(Ordering::Relaxed)
    }

    pub fn begin_wake(&self) -> bool {
        !self.wake_pending.swap(true, Ordering::AcqRel)
    }

    pub fn end_wake(&self) {
        self.wake_pending.store(false, Ordering::Release);
    }

    fn record(&self, claimed: Option<(i64, i64)>) {
        match claimed {
            Some((epoch, expires)) => {
                self.epoch.store(epoch, Ordering::Relaxed);
                self.expires_at_ms.store(expires, Ordering::Relaxed);
            }
            None => self.expires_at_ms.store(0, Ordering::Relaxed),
        }
    }
}

/// Claims or renews the lease inside `tx` (a write transaction); `false` when another replica
/// holds an unexpired lease. The epoch grows when the holder changes.
pub async fn claim(
    tx: &mut Transaction<'static, Any>,
    standing: &Standing,
) -> Result<bool, ServerError> {
    let now = now_ms();
    let row = repo::claim_lease(&mut **tx, holder(), now + TTL_MS, now).await?;
    if let Some(epoch) = row {
        if epoch != standing.epoch() && standing.epoch() != 0 {
            tracing::info!(epoch, "scheduler lease taken over");
        } else if standing.expires_at_ms.load(Ordering::Relaxed) == 0 {
            tracing::info!(
                epoch,
                holder = holder(),
                "this replica now holds the scheduler lease"
            );
        }
    }
    standing.record(row.map(|epoch| (epoch, now + TTL_MS)));
    Ok(row.is_some())
}

/// Gives the lease up (on shutdown), so another replica takes over at once.
pub async fn release(pool: &AnyPool, standing: &Standing) -> Result<(), ServerError> {
    repo::release_lease(pool, holder()).await?;
    standing.record(None);
    Ok(())
}

pub use super::repo::Counters;

pub async fn counters(pool: &AnyPool) -> Result<Counters, ServerError> {
    Ok(repo::counters(pool).await?)
}

/// Tells every replica that settings changed (in the transaction that changed them).
pub async fn bump_settings(db: &mut sqlx::AnyConnection) -> Result<(), ServerError> {
    repo::bump_counter(db, "settings_seq").await?;
    Ok(())
}

/// Asks the leader for a decision soon.
pub async fn bump_wake(pool: &AnyPool) -> Result<(), ServerError> {
    repo::bump_counter(pool, "wake_seq").await?;
    Ok(())
}

/// Tells the other replicas' agents that assignments changed (inside the pass's transaction).
pub async fn bump_assign(tx: &mut Transaction<'static, Any>) -> Result<(), ServerError> {
    repo::bump_counter(&mut **tx, "assign_seq").await?;
    Ok(())
}
