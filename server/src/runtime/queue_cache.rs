//! The Queue page's list, shared by everyone who looks at it until something changes.

use app::workloads::QueueRow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a computed queue is shown without recomputing it.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// A computed list: its generation, when it was computed, the rows.
type Computed = (u64, Instant, Arc<Vec<QueueRow>>);

#[derive(Default)]
pub struct QueueCache {
    /// Bumped on every change; a list computed under an older generation is not stored.
    generation: AtomicU64,
    rows: Mutex<Option<Computed>>,
    /// Held while one request computes, so concurrent requests share its result.
    pub computing: tokio::sync::Mutex<()>,
}

impl QueueCache {
    pub fn fresh(&self) -> Option<Arc<Vec<QueueRow>>> {
        let generation = self.generation();
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        match &*rows {
            Some((g, at, rows)) if *g == generation && at.elapsed() < MAX_AGE => Some(rows.clone()),
            _ => None,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn store(&self, generation: u64, rows: Arc<Vec<QueueRow>>) {
        *self.rows.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((generation, Instant::now(), rows));
    }

    /// Something changed: the next look computes afresh.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
