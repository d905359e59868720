//! The cluster's activity over time, from the workloads' run history: how many workloads waited
//! (averaged over each bucket), how long those that started waited (percentiles by class, as
//! DESIGN §5 defines them), and preemptions by the engine's rule.

use super::{
    repo,
    usage::{Buckets, Granularity},
};
use crate::ServerError;
use app::reports::{ClusterActivity, ReasonSeries, WaitSeries};
use app::workloads::{reasons::StopRule, WorkloadState};
use scheduler::sim::{WaitStats, DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};
use scheduler::DAY;
use sqlx::AnyPool;
use std::collections::{BTreeMap, HashMap};

/// Activity over `[from, to)` as of `now` (waiting after `now` is not counted).
pub async fn activity(
    pool: &AnyPool,
    from: i64,
    to: i64,
    granularity: Granularity,
    now: i64,
) -> Result<ClusterActivity, ServerError> {
    if to <= from || to - from > 400 * DAY {
        return Err(ServerError::invalid(
            "to",
            "The period must be positive and at most 400 days.",
        ));
    }
    if granularity == Granularity::Hour && to - from > 31 * DAY {
        return Err(ServerError::invalid(
            "granularity",
            "Hourly buckets cover at most 31 days; choose day or week.",
        ));
    }
    let mut db = pool.acquire().await?;
    let workloads = repo::workloads_between(&mut *db, from, to).await?;
    let runs = repo::runs_between(&mut *db, from, to).await?;
    let stops = repo::stops_between(&mut *db, from, to).await?;
    let host_size = repo::largest_node(&mut *db).await?;
    let host_size = host_size.unwrap_or(8).max(1);

    let buckets = bucket_starts(granularity, from, to);
    let index: HashMap<i64, usize> = buckets.iter().enumerate().map(|(i, b)| (*b, i)).collect();
    let end = to.min(now);

    // Waiting intervals: from submission to the first run, between runs, and after the last
    // run while still queued (or until a cancel while queued).
    let mut runs_of: HashMap<i64, Vec<(i64, Option<i64>)>> = HashMap::new();
    for (id, start, stop) in runs {
        runs_of.entry(id).or_default().push((start, stop));
    }
    let mut waited = vec![0.0f64; buckets.len()];
    let mut waited_gpus = vec![0.0f64; buckets.len()];
    // Where each waiting interval begins (+1) and ends (-1), for the peak depth.
    let mut edges: Vec<(i64, i64)> = Vec::new();
    let mut add = |a: i64, b: i64, gpus: f64| {
        let (mut t, b) = (a.max(from), b.min(end));
        if t < b {
            edges.extend([(t, 1), (b, -1)]);
        }
        while t < b {
            let bucket = granularity.bucket(t);
            let edge = granularity.next(bucket).min(b);
            if let Some(&i) = index.get(&bucket) {
                waited[i] += (edge - t) as f64;
                waited_gpus[i] += gpus * (edge - t) as f64;
            }
            t = edge;
        }
    };
    // Per bucket, the waits of the workloads that first started in it: all, debug, large.
    let mut started: Vec<[Vec<i64>; 3]> = vec![Default::default(); buckets.len()];
    for w in &workloads {
        let gpus = w.gpus as f64;
        let mut queued_since = Some(w.submitted_at);
        for (start, stop) in runs_of
            .get(&w.workload_id)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            if let Some(since) = queued_since.take() {
                add(since, *start, gpus);
            }
            // Gang members start together; a later run starts a new waiting gap only after
            // every earlier one ended.
            queued_since = *stop;
        }
        match (queued_since, w.state) {
            (Some(since), WorkloadState::Queued) => add(since, now, gpus),
            (Some(since), WorkloadState::Cancelled) if w.first_started_at.is_none() => {
                add(since, w.ended_at.unwrap_or(now), gpus)
            }
            _ => {}
        }
        if let Some(first) = w.first_started_at {
            if first >= from && first < to {
                if let Some(&i) = index.get(&granularity.bucket(first)) {
                    let wait = first - w.submitted_at;
                    let [all, debug, large] = &mut started[i];
                    all.push(wait);
                    if w.min_runtime_s > 0
                        && w.min_runtime_s <= DEBUG_MAX_MIN_RUNTIME
                        && w.gpus <= i64::from(DEBUG_MAX_GPUS)
                    {
                        debug.push(wait);
                    }
                    if w.gpus > host_size {
                        large.push(wait);
                    }
                }
            }
        }
    }

    let queue_peak = peak_depth(granularity, &buckets, edges);
    let elapsed: Vec<f64> = buckets
        .iter()
        .map(|b| ((granularity.next(*b).min(end) - (*b).max(from)).max(0)) as f64)
        .collect();
    let per = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .zip(&elapsed)
            .map(|(x, e)| if *e > 0.0 { x / e } else { 0.0 })
            .collect()
    };

    for bucket in &mut started {
        for waits in bucket.iter_mut() {
            waits.sort_unstable();
        }
    }
    let waits = ["all", "debug", "large"]
        .into_iter()
        .enumerate()
        .map(|(k, class)| {
            let stats: Vec<WaitStats> = started
                .iter()
                .map(|b| WaitStats::of_sorted(&b[k]))
                .collect();
            WaitSeries {
                class: class.to_string(),
                p50_s: stats.iter().map(|s| s.p50).collect(),
                p90_s: stats.iter().map(|s| s.p90).collect(),
                p99_s: stats.iter().map(|s| s.p99).collect(),
            }
        })
        .collect();

    let mut reasons: BTreeMap<StopRule, Vec<u64>> = BTreeMap::new();
    /// All a stop's detail needs to say here.
    #[derive(serde::Deserialize)]
    struct Stopped {
        rule: StopRule,
    }
    for (at, detail) in stops {
        let rule = serde_json::from_str::<Stopped>(&detail)
            .map_err(|error| sqlx::Error::Decode(Box::new(error)))?
            .rule;
        if let Some(&i) = index.get(&granularity.bucket(at)) {
            reasons
                .entry(rule)
                .or_insert_with(|| vec![0; buckets.len()])[i] += 1;
        }
    }

    Ok(ClusterActivity {
        from,
        to,
        granularity,
        queue_depth: per(&waited),
        queued_gpus: per(&waited_gpus),
        queue_peak,
        buckets,
        waits,
        preemptions: reasons
            .into_iter()
            .map(|(reason, counts)| ReasonSeries { reason, counts })
            .collect(),
    })
}

/// Per bucket, the most intervals open at one moment, from their `(at, +1 | -1)` edges. An
/// interval ending when another begins is not counted twice.
fn peak_depth(granularity: Granularity, buckets: &[i64], mut edges: Vec<(i64, i64)>) -> Vec<u32> {
    edges.sort_unstable();
    let (mut depth, mut k) = (0i64, 0usize);
    buckets
        .iter()
        .map(|&start| {
            while k < edges.len() && edges[k].0 <= start {
                depth += edges[k].1;
                k += 1;
            }
            let (end, mut most) = (granularity.next(start), depth);
            while k < edges.len() && edges[k].0 < end {
                depth += edges[k].1;
                most = most.max(depth);
                k += 1;
            }
            most.max(0) as u32
        })
        .collect()
}

/// The starts of the buckets that overlap `[from, to)`.
pub fn bucket_starts(granularity: Granularity, from: i64, to: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut b = granularity.bucket(from);
    while b < to {
        out.push(b);
        b = granularity.next(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_counts_what_waited_at_once_not_the_average() {
        let day = Granularity::Day;
        let buckets = [0, DAY, 2 * DAY];
        // 24 workloads waited together for ten minutes on day one; one waited all of day two.
        let mut edges: Vec<(i64, i64)> = (0..24).flat_map(|_| [(100, 1), (700, -1)]).collect();
        edges.extend([(DAY, 1), (2 * DAY, -1)]);
        // Back to back: one ends as the next begins, on day three.
        edges.extend([
            (2 * DAY + 10, 1),
            (2 * DAY + 20, -1),
            (2 * DAY + 20, 1),
            (2 * DAY + 30, -1),
        ]);
        assert_eq!(peak_depth(day, &buckets, edges), vec![24, 1, 1]);
    }

    #[test]
    fn weeks_start_on_monday_midnight_utc() {
        // 2026-11-30 is a Monday.
        let monday = 1_795_996_800;
        assert_eq!(Granularity::Week.bucket(monday), monday);
        assert_eq!(Granularity::Week.bucket(monday + 6 * DAY + 3_600), monday);
        assert_eq!(Granularity::Week.bucket(monday - 1), monday - 7 * DAY);
        assert_eq!(
            bucket_starts(Granularity::Week, monday + DAY, monday + 8 * DAY),
            vec![monday, monday + 7 * DAY]
        );
    }
}
