//! What the pages compute from the whole queue — the Queue page's list and the snapshot behind
//! every "why does it wait" — shared by everyone who looks until something changes.
//!
//! A request is served a result computed after it arrived (so it reflects every change committed
//! before it asked) and at most [`MAX_AGE`] old. Concurrent requests share one computation: while
//! one computes, the others wait for it, and every request that arrived before it began takes its
//! result. Under a steady stream of submissions (each one a change) this computes about once per
//! computation's duration, however many people are looking, instead of once per look.

use super::snapshot::Snapshots;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a computed result is shown without recomputing it.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Under a stream of changes, a page that may ([`Freshness::Coalesced`]) takes a result this
/// young whatever changed since: however often the queue changes, it is rebuilt for pages at most
/// about this often. Whoever is served such a result is told to look again once it may have
/// been rebuilt (see `Runtime::served_behind`).
pub const COALESCE: Duration = Duration::from_millis(250);

/// How recent a shared result a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Computed after the request arrived (it reflects every change committed before).
    Strict,
    /// As `Strict`, or computed less than [`COALESCE`] ago.
    Coalesced,
}

/// A shared result, and whether it was computed before changes the request came after.
pub struct Served<T> {
    pub value: Arc<T>,
    pub behind: bool,
}

/// One shared result: the generation it was computed under, when, and the value.
pub struct Shared<T> {
    value: Mutex<Option<(u64, Instant, Arc<T>)>>,
    /// Held while one request computes, so concurrent requests share its result.
    computing: tokio::sync::Mutex<()>,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            value: Mutex::new(None),
            computing: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T> Shared<T> {
    /// The stored value if it was computed at generation `since` or later and is young enough,
    /// or, where `freshness` allows, if it is younger than [`COALESCE`].
    fn fresh(&self, since: u64, freshness: Freshness) -> Option<Served<T>> {
        let value = self.value.lock().unwrap_or_else(|p| p.into_inner());
        match &*value {
            Some((g, at, value)) if *g >= since && at.elapsed() < MAX_AGE => Some(Served {
                value: value.clone(),
                behind: false,
            }),
            Some((_, at, value))
                if freshness == Freshness::Coalesced && at.elapsed() < COALESCE =>
            {
                Some(Served {
                    value: value.clone(),
                    behind: true,
                })
            }
            _ => None,
        }
    }

    fn store(&self, generation: u64, value: Arc<T>) {
        *self.value.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((generation, Instant::now(), value));
    }
}

/// A value recomputed now and then and read by everyone meanwhile, however old: with the
/// generation it was computed under and the (runtime) time it was computed at.
pub struct Latest<T> {
    value: Mutex<Option<(u64, i64, Arc<T>)>>,
    /// Held while one computes it.
    pub computing: tokio::sync::Mutex<()>,
    /// How long the last computation took, in milliseconds of wall time.
    pub cost_ms: AtomicU64,
}

impl<T> Default for Latest<T> {
    fn default() -> Self {
        Latest {
            value: Mutex::new(None),
            computing: tokio::sync::Mutex::new(()),
            cost_ms: AtomicU64::new(0),
        }
    }
}

impl<T> Latest<T> {
    pub fn get(&self) -> Option<(u64, i64, Arc<T>)> {
        self.value.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, generation: u64, at: i64, value: Arc<T>) {
        *self.value.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, at, value));
    }
}

/// A queued workload's place in scheduler order: what the Queue page shows besides the workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueEntry {
    pub workload_id: i64,
    /// Its cluster, and its place in that cluster's queue (1 first).
    pub cluster_id: i64,
    pub position: usize,
    pub allocated: bool,
    /// 1 for the best-ranked leaf.
    pub leaf_rank: u32,
    pub leaf_ratio: Option<f64>,
}

#[derive(Default)]
pub struct QueueCache {
    /// Bumped on every change.
    generation: AtomicU64,
    /// Bumped on every change to more than workloads: the tree, the nodes, the settings.
    shape: AtomicU64,
    /// The whole queue in scheduler order; a page reads the workloads of the rows it shows.
    pub order: Shared<Vec<QueueEntry>>,
    /// `None` until a budget tree exists.
    pub snapshot: Shared<Option<Snapshots>>,
    /// When each queued workload is likely to start (see `workloads::estimate`).
    pub estimates: Latest<scheduler::Projection>,
    /// The Queue page's rows for the order last shown.
    pub head: Head,
}

/// The rows a Queue page shows — the first workloads of a shared order, read from the database —
/// shared by every look served that same order with the same cluster and length: with 200 people
/// looking, reading the 200 rows at each look was the costliest statement of all (sqlx's
/// statement log at 10,000 queued).
#[derive(Default)]
pub struct Head {
    kept: Mutex<Option<HeadRows>>,
}

struct HeadRows {
    /// Kept alive, so that sharing it means the same order.
    order: Arc<Vec<QueueEntry>>,
    cluster: Option<i64>,
    limit: usize,
    rows: Arc<Vec<app::workloads::QueueRow>>,
}

impl Head {
    /// The rows read for `order` (cluster, length), or those `read` gives, kept for the next look.
    pub async fn get_or_read<E, F>(
        &self,
        order: &Arc<Vec<QueueEntry>>,
        cluster: Option<i64>,
        limit: usize,
        read: impl FnOnce() -> F,
    ) -> Result<Arc<Vec<app::workloads::QueueRow>>, E>
    where
        F: Future<Output = Result<Vec<app::workloads::QueueRow>, E>>,
    {
        let same = |k: &&HeadRows| {
            Arc::ptr_eq(&k.order, order) && k.cluster == cluster && k.limit == limit
        };
        if let Some(kept) = self.lock().as_ref().filter(same) {
            return Ok(kept.rows.clone());
        }
        let rows = Arc::new(read().await?);
        *self.lock() = Some(HeadRows {
            order: order.clone(),
            cluster,
            limit,
            rows: rows.clone(),
        });
        Ok(rows)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HeadRows>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl QueueCache {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Something changed: requests from now on need a result computed from now on.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn shape(&self) -> u64 {
        self.shape.load(Ordering::Acquire)
    }

    /// More than workloads changed (see `shape`): bumped before the generation, so whoever sees
    /// the new generation sees the new shape too.
    pub fn reshape(&self) {
        self.shape.fetch_add(1, Ordering::AcqRel);
        self.invalidate();
    }

    /// The value of `shared` for a request that arrived at generation `since`: the stored one if
    /// it is fresh enough for it, else the result of the computation under way or of a new one.
    pub async fn get_or_compute<T, E, F>(
        &self,
        shared: &Shared<T>,
        since: u64,
        freshness: Freshness,
        compute: impl FnOnce() -> F,
    ) -> Result<Served<T>, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        if let Some(served) = shared.fresh(since, freshness) {
            return Ok(served);
        }
        let _computing = shared.computing.lock().await;
        if let Some(served) = shared.fresh(since, freshness) {
            return Ok(served);
        }
        let generation = self.generation();
        let value = Arc::new(compute().await?);
        shared.store(generation, value.clone());
        Ok(Served {
            value,
            behind: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn concurrent_looks_share_one_computation_and_a_change_asks_for_a_new_one() {
        let cache = Arc::new(QueueCache::default());
        let computed = Arc::new(AtomicUsize::new(0));
        let look = |cache: Arc<QueueCache>, computed: Arc<AtomicUsize>| async move {
            let since = cache.generation();
            cache
                .get_or_compute(&cache.order, since, Freshness::Strict, || async {
                    computed.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, ()>(Vec::new())
                })
                .await
                .unwrap()
                .value
        };
        let looks: Vec<_> = (0..20)
            .map(|_| tokio::spawn(look(cache.clone(), computed.clone())))
            .collect();
        for l in looks {
            l.await.unwrap();
        }
        assert_eq!(
            computed.load(Ordering::SeqCst),
            1,
            "twenty looks, one computation"
        );
        look(cache.clone(), computed.clone()).await;
        assert_eq!(computed.load(Ordering::SeqCst), 1, "still fresh");
        cache.invalidate();
        look(cache.clone(), computed.clone()).await;
        assert_eq!(
            computed.load(Ordering::SeqCst),
            2,
            "a change since: computed again"
        );
    }

    #[tokio::test]
    async fn a_look_that_may_coalesce_takes_a_result_a_moment_old_and_is_told_it_is_behind() {
        let cache = QueueCache::default();
        let computed = AtomicUsize::new(0);
        let look = |freshness| {
            let since = cache.generation();
            cache.get_or_compute(&cache.order, since, freshness, || async {
                computed.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(vec![QueueEntry {
                    workload_id: computed.load(Ordering::SeqCst) as i64,
                    cluster_id: 1,
                    position: 1,
                    allocated: true,
                    leaf_rank: 1,
                    leaf_ratio: None,
                }])
            })
        };
        let first = look(Freshness::Coalesced).await.unwrap();
        assert!(!first.behind);
        cache.invalidate();

        let coalesced = look(Freshness::Coalesced).await.unwrap();
        assert!(coalesced.behind, "built before the change");
        assert_eq!(coalesced.value[0].workload_id, 1);
        assert_eq!(computed.load(Ordering::SeqCst), 1);

        let strict = look(Freshness::Strict).await.unwrap();
        assert!(!strict.behind);
        assert_eq!(strict.value[0].workload_id, 2, "computed after the change");

        cache.invalidate();
        tokio::time::sleep(COALESCE).await;
        let later = look(Freshness::Coalesced).await.unwrap();
        assert!(!later.behind, "too old to coalesce: computed again");
        assert_eq!(later.value[0].workload_id, 3);
    }

    #[tokio::test]
    async fn looks_served_the_same_order_share_one_read_of_its_rows() {
        let head = Head::default();
        let reads = AtomicUsize::new(0);
        let look = |order: &Arc<Vec<QueueEntry>>, cluster: Option<i64>, limit: usize| {
            let order = order.clone();
            let reads = &reads;
            let head = &head;
            async move {
                head.get_or_read(&order, cluster, limit, || async {
                    reads.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ()>(Vec::new())
                })
                .await
                .unwrap();
            }
        };
        let order = Arc::new(Vec::new());
        look(&order, None, 200).await;
        look(&order, None, 200).await;
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the same order: read once");
        look(&order, Some(2), 200).await;
        look(&order, Some(2), 50).await;
        assert_eq!(
            reads.load(Ordering::SeqCst),
            3,
            "another cluster, another length"
        );
        // An order computed again, even if equal, is another order: its rows are read again.
        let again = Arc::new(Vec::new());
        look(&again, Some(2), 50).await;
        assert_eq!(reads.load(Ordering::SeqCst), 4);
    }
}
