//! The embedded scheduler runtime: one task that wakes on every event and on a safety tick, feeds
//! the engine a snapshot and applies its decisions in one transaction.

pub mod apply;
pub mod config;
pub mod ledger;
pub mod reasons;
pub mod snapshot;

use crate::{nodes::repo as node_repo, users::service::now, ServerError};
use config::RuntimeConfig;
use sqlx::AnyPool;
use std::{
    sync::{Arc, RwLock},
    time::Duration,
};
use tokio::sync::{watch, Notify};

/// A handle to the runtime: cheap to clone, shared by handlers that need to wake it.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    /// Live settings: the Settings page changes them without a restart.
    config: RwLock<RuntimeConfig>,
    wake: Notify,
    /// Bumped whenever assignments change, so agents' long polls answer at once.
    assignments: watch::Sender<u64>,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy)]
pub struct PassOutcome {
    pub started: usize,
    pub stopped: usize,
    pub next_wake: Option<i64>,
}

impl Runtime {
    pub fn new(pool: AnyPool, config: RuntimeConfig) -> Runtime {
        let (assignments, _) = watch::channel(0);
        Runtime {
            inner: Arc::new(Inner {
                pool,
                config: RwLock::new(config),
                wake: Notify::new(),
                assignments,
            }),
        }
    }

    /// The settings in force now.
    pub fn config(&self) -> RuntimeConfig {
        *self
            .inner
            .config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies new settings from the next decision on.
    pub fn set_config(&self, config: RuntimeConfig) {
        *self
            .inner
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = config;
        self.wake();
    }

    /// Asks for a decision soon (a submission, a cancel, a completion, a heartbeat change…).
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    pub fn assignments(&self) -> watch::Receiver<u64> {
        self.inner.assignments.subscribe()
    }

    /// Tells waiting agents that assignments may have changed.
    pub fn announce(&self) {
        self.inner.assignments.send_modify(|v| *v += 1);
    }

    /// Runs the decision loop until the process ends.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let runtime = self.clone();
        tokio::spawn(async move {
            loop {
                let started = now();
                let next = match runtime.pass(started).await {
                    Ok(outcome) => outcome.next_wake,
                    Err(error) => {
                        tracing::error!(%error, "scheduler pass failed");
                        None
                    }
                };
                let tick = Duration::from_millis(runtime.config().safety_tick_ms);
                let until_next = next
                    .map(|t| Duration::from_secs((t - now()).max(0) as u64).min(tick))
                    .unwrap_or(tick);
                tokio::select! {
                    _ = runtime.inner.wake.notified() => {}
                    _ = tokio::time::sleep(until_next) => {}
                }
            }
        })
    }

    /// One decision at `now`: mark silent nodes down, book usage, decide, apply — in one
    /// transaction. Work stopped and requeued is offered again at the same `now`.
    pub async fn pass(&self, now: i64) -> Result<PassOutcome, ServerError> {
        let config = &self.config();
        let mut tx = crate::db::begin_write(&self.inner.pool).await?;
        node_repo::mark_silent_nodes_down(&mut *tx, now - config.heartbeat_deadline, now).await?;
        ledger::accrue(&mut tx, now).await?;
        crate::reports::rollup::keep_up(&mut tx, now).await?;
        let reshared = crate::budget::changes::apply_due(&mut tx, now).await?;
        if reshared > 0 {
            tracing::info!(requests = reshared, "scheduled budget changes applied");
        }
        let mut outcome = PassOutcome::default();
        for _ in 0..4 {
            let Some(snapshot) = snapshot::load(&mut tx, config, now).await? else {
                break;
            };
            let decision = snapshot
                .engine
                .decide(&snapshot.state(), now)
                .map_err(|e| {
                    ServerError::Config(format!("the engine refused the snapshot: {e:?}"))
                })?;
            outcome.next_wake = decision.next_wake;
            let applied = apply::apply(&mut tx, &snapshot, &decision, now).await?;
            outcome.started += applied.started;
            outcome.stopped += applied.stopped;
            if applied.requeued == 0 {
                break;
            }
        }
        tx.commit().await?;
        if outcome.started + outcome.stopped > 0 {
            tracing::info!(
                started = outcome.started,
                stopped = outcome.stopped,
                "scheduler pass"
            );
            self.announce();
        }
        Ok(outcome)
    }
}
