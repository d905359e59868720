//! The leader's copy of the queued and running workloads, kept between passes.
//!
//! With tens of thousands queued, reading them all at every pass was most of a pass's time. Every
//! change this process makes to a workload or its runs (a submission, a cancel, a finished run, a
//! decision) names the workload ([`super::Runtime::workloads_changed`]), and the next read re-reads
//! only those. What this process cannot name is read whole: after a wake-up forwarded by another
//! replica and when the lease changed hands. Changes made elsewhere without a wake-up (the command
//! line writes to the same database) are caught by a check every [`CHECK_EVERY`]: how many
//! workloads are queued and running, their runs, and the newest id, from the database against the
//! copy (one aggregate row); any difference reads everything again, and so does every
//! [`FULL_READ_EVERY`] whatever the check says. A decision made on an out-of-date copy is still
//! safe: each action is applied only where its workload stands as it was read.

use super::{repo, snapshot::Active};
use crate::ServerError;
use sqlx::AnyConnection;
use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// How often the copy is checked against the database.
pub const CHECK_EVERY: Duration = Duration::from_secs(10);

/// The longest the copy goes without being read whole.
pub const FULL_READ_EVERY: Duration = Duration::from_secs(600);

/// Workloads changed since the copy was last brought up to date.
#[derive(Debug, Default)]
pub struct Changed {
    ids: BTreeSet<i64>,
    /// Something changed that this process cannot name.
    unknown: bool,
}

impl Changed {
    pub fn add(&mut self, ids: impl IntoIterator<Item = i64>) {
        self.ids.extend(ids);
    }

    pub fn unknown(&mut self) {
        self.unknown = true;
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && !self.unknown
    }
}

/// The copy, when it was last read whole and checked, and under which lease epoch.
pub struct Copy {
    active: Arc<Active>,
    read_at: Instant,
    checked_at: Instant,
    epoch: i64,
}

/// Writes to workloads this process has under way: how many have begun, and how many of them are
/// not yet named as changed. A check of the copy against the database while one is under way
/// could see it committed and not yet named, and read everything again for nothing (with 50
/// submissions a second that was nearly every check).
#[derive(Debug, Default)]
pub struct Writes(Mutex<(u64, u32)>);

impl Writes {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, u32)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn begin(&self) {
        let mut w = self.lock();
        w.0 += 1;
        w.1 += 1;
    }

    /// The write is named (or came to nothing).
    pub fn end(&self) {
        let mut w = self.lock();
        w.1 = w.1.saturating_sub(1);
    }

    /// How many writes have begun, when none is under way.
    pub fn quiet(&self) -> Option<u64> {
        let w = self.lock();
        (w.1 == 0).then_some(w.0)
    }

    fn begun(&self) -> u64 {
        self.lock().0
    }
}

/// Brings `copy` up to date with what changed and returns it: re-reads the named workloads, or
/// everything when `changed` names what it cannot, the epoch moved on or the copy is old. On an
/// error the copy is dropped (the next read is whole), since the changes taken are lost.
///
/// When due, the copy is compared with the database (see [`CHECK_EVERY`]) if `quiet` is
/// [`Writes::quiet`] as it was when `changed` was taken and no write began since; `None` never
/// compares. Only the scheduler's pass compares: its own decisions are named before it reads
/// again, while a page reading between a decision's commit and its naming would find the copy
/// behind.
pub async fn bring_up_to_date(
    copy: &mut Option<Copy>,
    changed: Changed,
    epoch: i64,
    quiet: Option<u64>,
    writes: &Writes,
    db: &mut AnyConnection,
) -> Result<Arc<Active>, ServerError> {
    let incremental = copy.as_ref().is_some_and(|c| {
        !changed.unknown && c.epoch == epoch && c.read_at.elapsed() < FULL_READ_EVERY
    });
    let taken = copy.take();
    let mut kept = match taken {
        Some(mut c) if incremental => {
            if !changed.ids.is_empty() {
                let ids: Vec<i64> = changed.ids.into_iter().collect();
                Arc::make_mut(&mut c.active).refresh(db, &ids).await?;
            }
            Some(c)
        }
        _ => None,
    };
    if let Some((c, quiet)) = kept
        .as_mut()
        .filter(|c| c.checked_at.elapsed() >= CHECK_EVERY)
        .zip(quiet)
    {
        let stored = repo::active_summary(&mut *db).await?;
        if writes.begun() != quiet {
            // A write began meanwhile: checked at a later pass.
        } else if stored != c.active.summary() {
            tracing::info!("workloads changed outside this server; reading them all again");
            kept = None;
        } else {
            c.checked_at = Instant::now();
        }
    }
    let fresh = match kept {
        Some(c) => c,
        None => Copy {
            active: Arc::new(Active::read_all(db).await?),
            read_at: Instant::now(),
            checked_at: Instant::now(),
            epoch,
        },
    };
    let active = fresh.active.clone();
    *copy = Some(fresh);
    Ok(active)
}
