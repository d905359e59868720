//! When each queued workload is likely to start: the engine run forward from the pages' snapshot
//! ([`scheduler::project`]), each workload running for its project's median run time of the last
//! two weeks (the cluster's median where a project has too few, an hour where nothing ran).
//!
//! A projection over a large queue takes a while, so it is shared and kept: a page reads the
//! latest one, however old, and asks for a new one in the background once it is
//! [`REFRESH_S`] old; the server also keeps one ready before anyone looks ([`keep_warm`]). When
//! no projection covers the workload a page asks about (the first look, or a workload submitted
//! since), that page waits for a new one if projections are quick (under 200 ms, as on most
//! clusters); on a huge queue it says its start is being estimated. Looks at
//! the same time share one computation, which runs at the lowest priority ([`crate::background`]):
//! at 50,000 queued it takes seconds of a core, which requests and passes need more.

use crate::{
    runtime::{snapshot::Snapshots, Runtime},
    ServerError,
};
use app::workloads::StartEstimate;
use scheduler::{BudgetId, Estimate, Limits, Projection, WorkloadId, WorkloadSpec, DAY, HOUR};
use sqlx::AnyPool;
use std::{
    collections::HashMap,
    sync::{atomic::Ordering, Arc},
    time::{Duration, Instant},
};

/// A projection older than this (runtime seconds) is replaced in the background, and never more
/// often than ten times as long as the last one took (a projection of a huge queue takes seconds).
pub const REFRESH_S: i64 = 30;
/// A projection that took less than this (milliseconds) is computed at once for a workload it
/// does not cover yet; a slower one is refreshed in the background meanwhile.
const INLINE_MS: i64 = 200;
/// Queued and running workloads from which the first projection may take longer than a page waits
/// (at 1,024 GPUs and 10,000 queued one takes about 140 ms).
const LARGE_QUEUE: usize = 5_000;
/// Run times come from work that succeeded in this many days.
pub const HISTORY_DAYS: i64 = 14;
/// A project needs this many finished workloads for a median of its own.
const MIN_SAMPLES: usize = 3;
/// Run time assumed where nothing finished in the history.
const DEFAULT_RUN_S: i64 = HOUR;

/// Guessed run times: each project's median, and the cluster's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTimes {
    by_leaf: HashMap<BudgetId, i64>,
    overall: Option<i64>,
}

impl RunTimes {
    /// From `(leaf, run seconds)` samples.
    pub fn from_samples(samples: impl IntoIterator<Item = (BudgetId, i64)>) -> RunTimes {
        let mut by_leaf: HashMap<BudgetId, Vec<i64>> = HashMap::new();
        let mut all = Vec::new();
        for (leaf, run_s) in samples {
            by_leaf.entry(leaf).or_default().push(run_s);
            all.push(run_s);
        }
        RunTimes {
            by_leaf: by_leaf
                .into_iter()
                .filter(|(_, v)| v.len() >= MIN_SAMPLES)
                .map(|(leaf, mut v)| (leaf, median(&mut v)))
                .collect(),
            overall: (all.len() >= MIN_SAMPLES).then(|| median(&mut all)),
        }
    }

    /// A workload's expected run time: its project's median (or the cluster's, or an hour), and
    /// never less than the minimum runtime it asked for.
    pub fn of(&self, w: &WorkloadSpec) -> i64 {
        let typical = self
            .by_leaf
            .get(&w.leaf)
            .copied()
            .or(self.overall)
            .unwrap_or(DEFAULT_RUN_S);
        typical.max(w.min_runtime).max(1)
    }
}

fn median(v: &mut [i64]) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The estimate for one workload, as the pages and the API show it.
pub fn estimate_of(projection: &Projection, workload_id: i64) -> Option<StartEstimate> {
    let (at, until) = match projection.start_of(WorkloadId(workload_id as u64)) {
        Estimate::At(at) => (Some(at), projection.until),
        Estimate::After(until) => (None, until),
        Estimate::Unknown => return None,
    };
    Some(StartEstimate {
        at,
        until,
        as_of: projection.from,
    })
}

/// The latest projection; `need`: a workload it must cover (else a new one is computed now).
/// `None` until a budget tree exists.
pub async fn latest(
    pool: &AnyPool,
    runtime: &Runtime,
    need: Option<i64>,
) -> Result<Option<Arc<Projection>>, ServerError> {
    let cache = runtime.queue_cache();
    let since = cache.generation();
    let covers = |p: &Projection| {
        need.is_none_or(|id| p.start_of(WorkloadId(id as u64)) != Estimate::Unknown)
    };
    if let Some((generation, at, projection)) = cache.estimates.get() {
        let cost_ms = cache.estimates.cost_ms.load(Ordering::Relaxed) as i64;
        let covered = covers(&projection);
        // A workload submitted since: computed now where that is quick, else in the background
        // (its page says so) like a projection grown old.
        if !covered && cost_ms < INLINE_MS {
            return compute_now(pool, runtime, since, covers).await;
        }
        let due = match covered {
            true => stale(runtime, generation, at),
            false => runtime.now() - at >= (10 * cost_ms / 1000).max(1),
        };
        if due {
            let (pool, runtime) = (pool.clone(), runtime.clone());
            tokio::spawn(async move {
                let cache = runtime.queue_cache();
                // One refresh at a time; a look that finds one under way keeps the old.
                let Ok(_computing) = cache.estimates.computing.try_lock() else {
                    return;
                };
                if let Err(e) = refresh(&pool, &runtime).await {
                    tracing::warn!(error = %e, "start projection failed");
                }
            });
        }
        return Ok(Some(projection));
    }
    first(pool, runtime).await
}

/// Whether a projection computed under `generation` at `at` is due for replacing: the queue has
/// changed since, it is [`REFRESH_S`] old, and at least ten times as old as the last one took.
fn stale(runtime: &Runtime, generation: u64, at: i64) -> bool {
    let cache = runtime.queue_cache();
    let cost_ms = cache.estimates.cost_ms.load(Ordering::Relaxed) as i64;
    let age = runtime.now() - at;
    generation < cache.generation() && age >= REFRESH_S && age >= (10 * cost_ms / 1000).max(1)
}

/// Keeps a projection ready without waiting for a look: every `every`, where there is none yet or
/// the latest is [`stale`], computes one (at the lowest priority, like every projection). At
/// 50,000 queued the first takes seconds of a core: computed when a crowd of readers first looked,
/// it ran while they waited and its looks said starts were still being estimated. A server whose
/// queue does not change computes none.
pub fn keep_warm(pool: AnyPool, runtime: Runtime, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let cache = runtime.queue_cache();
            let due = cache
                .estimates
                .get()
                .is_none_or(|(generation, at, _)| stale(&runtime, generation, at));
            if !due {
                continue;
            }
            // A look computing one meanwhile is left to it.
            let Ok(_computing) = cache.estimates.computing.try_lock() else {
                continue;
            };
            if let Err(e) = refresh(&pool, &runtime).await {
                tracing::warn!(error = %e, "start projection failed");
            }
        }
    })
}

/// The first projection since the server started: one look starts it and every look waits for it,
/// on a large queue (as the latest pass saw it) only as long as a quick one takes. There it takes
/// seconds, and while the queue changes every few milliseconds, looks that each waited for a
/// projection newer than their arrival computed one after another: 200 readers waited up to 48 s.
/// Those looks now say their start is being estimated.
async fn first(pool: &AnyPool, runtime: &Runtime) -> Result<Option<Arc<Projection>>, ServerError> {
    let large = runtime.active_workloads_seen().unwrap_or(0) >= LARGE_QUEUE;
    let (pool, runtime) = (pool.clone(), runtime.clone());
    let computing = tokio::spawn(async move {
        let cache = runtime.queue_cache();
        let _computing = cache.estimates.computing.lock().await;
        match cache.estimates.get() {
            Some((_, _, projection)) => Ok(Some(projection)),
            None => refresh(&pool, &runtime).await,
        }
    });
    let joined = match large {
        true => {
            let quick = std::time::Duration::from_millis(INLINE_MS as u64);
            match tokio::time::timeout(quick, computing).await {
                Ok(joined) => joined,
                Err(_) => return Ok(None),
            }
        }
        false => computing.await,
    };
    joined.map_err(|e| ServerError::Config(format!("the start projection stopped: {e}")))?
}

/// Waits for a projection computed from generation `since` on that `covers` what is asked.
async fn compute_now(
    pool: &AnyPool,
    runtime: &Runtime,
    since: u64,
    covers: impl Fn(&Projection) -> bool,
) -> Result<Option<Arc<Projection>>, ServerError> {
    let cache = runtime.queue_cache();
    let _computing = cache.estimates.computing.lock().await;
    if let Some((generation, _, projection)) = cache.estimates.get() {
        if generation >= since && covers(&projection) {
            return Ok(Some(projection));
        }
    }
    refresh(pool, runtime).await
}

/// Computes a projection from the pages' snapshot and keeps it. The caller holds `computing`.
async fn refresh(
    pool: &AnyPool,
    runtime: &Runtime,
) -> Result<Option<Arc<Projection>>, ServerError> {
    let began = Instant::now();
    let cache = runtime.queue_cache();
    let generation = cache.generation();
    let snapshot = super::service::page_snapshot(
        pool,
        runtime,
        generation,
        crate::runtime::queue_cache::Freshness::Strict,
    )
    .await?
    .value;
    if snapshot
        .as_ref()
        .as_ref()
        .is_none_or(|s| s.clusters.is_empty())
    {
        return Ok(None);
    }
    let now = runtime.now();
    let samples = super::repo::recent_run_times(pool, now - HISTORY_DAYS * DAY, 20_000).await?;
    let projection = crate::background::run_low("hourglass-estimate", move || {
        let snaps: &Snapshots = snapshot.as_ref().as_ref().expect("checked above");
        let mut merged: Option<scheduler::Projection> = None;
        for snap in &snaps.clusters {
            let cluster = snap.cluster.cluster_id;
            let run_times = RunTimes::from_samples(
                samples
                    .iter()
                    .filter(|&&(on, _, _)| on == cluster)
                    .filter_map(|&(_, node, run_s)| {
                        snap.tree.engine_id(node).map(|leaf| (leaf, run_s))
                    }),
            );
            let state = snap.state();
            let active = state.queued.len() + state.running.len();
            if active == 0 && merged.is_some() {
                continue;
            }
            let projection = scheduler::project(
                &snap.engine,
                &state,
                now,
                |w| run_times.of(w),
                Limits::for_workloads(active),
            )?;
            match merged.as_mut() {
                Some(m) => m.merge(projection),
                None => merged = Some(projection),
            }
        }
        Ok::<_, scheduler::SnapshotError>(
            merged.expect("a snapshot has at least one cluster: checked above"),
        )
    })
    .await?
    .map_err(|e| ServerError::Config(format!("the engine refused the snapshot: {e:?}")))?;
    let projection = Arc::new(projection);
    cache.estimates.set(generation, now, projection.clone());
    cache
        .estimates
        .cost_ms
        .store(began.elapsed().as_millis() as u64, Ordering::Relaxed);
    tracing::debug!(
        ms = began.elapsed().as_millis() as u64,
        "start projection computed"
    );
    Ok(Some(projection))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(leaf: u32, min_runtime: i64) -> WorkloadSpec {
        WorkloadSpec {
            id: WorkloadId(1),
            leaf: BudgetId(leaf),
            gpus: 1,
            min_runtime,
            resumable: true,
            priority: 0,
            submitted_at: 0,
            time_limit: None,
        }
    }

    #[test]
    fn a_run_time_is_the_projects_median_then_the_clusters_then_an_hour_and_at_least_the_minimum() {
        let none = RunTimes::from_samples([]);
        assert_eq!(none.of(&spec(1, 0)), HOUR);
        assert_eq!(none.of(&spec(1, 2 * HOUR)), 2 * HOUR);

        let samples = [(1, 100), (1, 300), (1, 200), (2, 5000), (2, 9000)]
            .map(|(leaf, s)| (BudgetId(leaf), s));
        let times = RunTimes::from_samples(samples);
        assert_eq!(times.of(&spec(1, 0)), 200, "project 1's own median");
        assert_eq!(
            times.of(&spec(2, 0)),
            300,
            "too few of its own: the cluster's median"
        );
        assert_eq!(
            times.of(&spec(1, 900)),
            900,
            "never below its minimum runtime"
        );
    }
}
