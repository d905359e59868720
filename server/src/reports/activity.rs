//! The cluster's activity over time, from the workloads' run history: how many workloads waited
//! (averaged over each bucket), how long those that started waited (percentiles by class, as
//! DESIGN §5 defines them), and preemptions by the engine's rule.

use super::{
    activity_hours::{self, FirstStart, HourActivity},
    activity_rollup, repo,
    usage::{Buckets, Granularity},
};
use crate::ServerError;
use app::reports::{ClusterActivity, ReasonSeries, WaitSeries};
use app::workloads::reasons::StopRule;
use scheduler::sim::WaitStats;
use scheduler::{DAY, HOUR};
use sqlx::{AnyConnection, AnyPool};
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
    // Up to date, a read costs one query on the connection it holds; hours due are rolled up
    // first, without holding it (the roller takes connections of its own).
    let mut db = pool.acquire().await?;
    let mut upto = activity_rollup::upto(&mut db).await?;
    if activity_rollup::behind(upto, now) {
        drop(db);
        upto = activity_rollup::ensure(pool, now).await?;
        db = pool.acquire().await?;
    }
    let host_size = repo::largest_node(&mut *db).await?;
    let host_size = host_size.unwrap_or(8).max(1);
    let hours = hours_between(&mut db, from, to, now, upto).await?;

    let buckets = bucket_starts(granularity, from, to);
    let index: HashMap<i64, usize> = buckets.iter().enumerate().map(|(i, b)| (*b, i)).collect();
    let end = to.min(now);
    let mut waited = vec![0i64; buckets.len()];
    let mut waited_gpus = vec![0i64; buckets.len()];
    let mut queue_peak = vec![0u32; buckets.len()];
    // Per bucket, the waits of the workloads that first started in it: all, debug, large.
    let mut started: Vec<[Vec<i64>; 3]> = vec![Default::default(); buckets.len()];
    let mut reasons: BTreeMap<StopRule, Vec<u64>> = BTreeMap::new();
    for (hour, cell) in &hours {
        let Some(&i) = index.get(&granularity.bucket(*hour)) else {
            continue;
        };
        waited[i] += cell.waited_s;
        waited_gpus[i] += cell.waited_gpu_s;
        queue_peak[i] = queue_peak[i].max(cell.peak);
        let [all, debug, large] = &mut started[i];
        for first in cell.waits.iter().map(|&p| FirstStart::unpack(p)) {
            all.push(first.wait_s);
            if first.debug {
                debug.push(first.wait_s);
            }
            if first.gpus > host_size {
                large.push(first.wait_s);
            }
        }
        for (rule, count) in &cell.stops {
            reasons
                .entry(*rule)
                .or_insert_with(|| vec![0; buckets.len()])[i] += count;
        }
    }

    let elapsed: Vec<f64> = buckets
        .iter()
        .map(|b| ((granularity.next(*b).min(end) - (*b).max(from)).max(0)) as f64)
        .collect();
    let per = |v: &[i64]| -> Vec<f64> {
        v.iter()
            .zip(&elapsed)
            .map(|(x, e)| if *e > 0.0 { *x as f64 / e } else { 0.0 })
            .collect()
    };

    let waits = ["all", "debug", "large"]
        .into_iter()
        .enumerate()
        .map(|(k, class)| {
            let stats: Vec<WaitStats> = started
                .iter_mut()
                .map(|b| WaitStats::of_unsorted(&mut b[k]))
                .collect();
            WaitSeries {
                class: class.to_string(),
                p50_s: stats.iter().map(|s| s.p50).collect(),
                p90_s: stats.iter().map(|s| s.p90).collect(),
                p99_s: stats.iter().map(|s| s.p99).collect(),
            }
        })
        .collect();

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

/// The hours of `[from, to)`: whole hours the rollup covers (up to `upto`) read from it, the rest
/// (the last hour or two, and parts of hours at either end) worked out from the run history.
pub async fn hours_between(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
    now: i64,
    upto: Option<i64>,
) -> Result<BTreeMap<i64, HourActivity>, ServerError> {
    let whole_from =
        from.div_euclid(HOUR) * HOUR + if from.rem_euclid(HOUR) > 0 { HOUR } else { 0 };
    let whole_to = (to.div_euclid(HOUR) * HOUR).min(upto.unwrap_or(i64::MIN));
    if whole_from >= whole_to {
        return from_history(db, from, to, now).await;
    }
    let mut out = from_history(db, from, whole_from, now).await?;
    out.extend(activity_rollup::read(db, whole_from, whole_to).await?);
    out.extend(from_history(db, whole_to, to, now).await?);
    Ok(out)
}

/// The hours of `[from, to)` worked out from the workloads alive in it and their runs.
pub async fn from_history(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
    now: i64,
) -> Result<BTreeMap<i64, HourActivity>, ServerError> {
    if from >= to {
        return Ok(BTreeMap::new());
    }
    let workloads = repo::workloads_between(&mut *db, from, to).await?;
    let runs = repo::runs_between(&mut *db, from, to).await?;
    let stops = repo::stops_between(&mut *db, from, to).await?;
    activity_hours::hours(&workloads, &runs, &stops, from, to, now)
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
