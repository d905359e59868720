//! The server's side of GPU sampling: each sample is attributed to the run that held that GPU at
//! that moment — the run's mean, its workload's series in 5-minute buckets, its leaf's GPU-seconds
//! sampled and weighted by utilization — and each GPU's latest sample is kept on its node.

use super::protocol::GpuSample;
use crate::{runtime::snapshot::parse_indices, ServerError};
use scheduler::HOUR;
use sqlx::{AnyPool, FromRow};
use std::collections::BTreeMap;

/// The width of a workload's utilization series.
pub const BUCKET_S: i64 = 300;

#[derive(FromRow)]
struct HeldRun {
    workload_run_id: i64,
    workload_id: i64,
    budget_node_id: i64,
    gpu_indices: String,
    started_at: i64,
    ended_at: Option<i64>,
}

/// Sums of utilization (percent) and how many samples they add up.
#[derive(Default, Clone, Copy)]
struct Sum {
    percent: f64,
    samples: i64,
}

/// Records one sync's samples from node `node_id` (times after `now` read as `now`: the node's
/// clock may run ahead).
pub async fn record(
    pool: &AnyPool,
    node_id: i64,
    samples: &[GpuSample],
    now: i64,
) -> Result<(), ServerError> {
    let Some(since) = samples.iter().map(|s| s.at.min(now)).min() else {
        return Ok(());
    };
    let runs: Vec<HeldRun> = sqlx::query_as(
        "select r.workload_run_id, r.workload_id, w.budget_node_id, r.gpu_indices, r.started_at,
                r.ended_at
         from workload_run r join workload w on w.workload_id = r.workload_id
         where r.node_id = $1 and (r.ended_at is null or r.ended_at > $2)",
    )
    .bind(node_id)
    .bind(since)
    .fetch_all(pool)
    .await?;
    let held: Vec<(&HeldRun, Vec<u32>)> = runs
        .iter()
        .map(|r| (r, parse_indices(&r.gpu_indices)))
        .collect();
    let mut per_run: BTreeMap<i64, Sum> = BTreeMap::new();
    let mut per_bucket: BTreeMap<(i64, i64), Sum> = BTreeMap::new();
    // (leaf, hour) → (GPU-seconds sampled, the same weighted by utilization)
    let mut per_hour: BTreeMap<(i64, i64), (f64, f64)> = BTreeMap::new();
    let mut latest: BTreeMap<u32, f64> = BTreeMap::new();
    for sample in samples.iter().filter(|s| s.utilization.is_finite()) {
        let at = sample.at.min(now);
        let sample = GpuSample {
            utilization: sample.utilization.clamp(0.0, 100.0),
            ..sample.clone()
        };
        latest.insert(sample.gpu, sample.utilization);
        let holder = held.iter().find(|(run, gpus)| {
            run.started_at <= at
                && run.ended_at.is_none_or(|end| at < end)
                && gpus.contains(&sample.gpu)
        });
        let Some((run, _)) = holder else {
            continue;
        };
        let run_sum = per_run.entry(run.workload_run_id).or_default();
        run_sum.percent += sample.utilization;
        run_sum.samples += 1;
        let bucket = per_bucket
            .entry((run.workload_id, at.div_euclid(BUCKET_S) * BUCKET_S))
            .or_default();
        bucket.percent += sample.utilization;
        bucket.samples += 1;
        let seconds = f64::from(sample.every_s.max(1));
        let hour = per_hour
            .entry((run.budget_node_id, at.div_euclid(HOUR) * HOUR))
            .or_default();
        hour.0 += seconds;
        hour.1 += seconds * sample.utilization / 100.0;
    }
    let latest = latest
        .iter()
        .map(|(gpu, util)| format!("{gpu}:{util}"))
        .collect::<Vec<_>>()
        .join(";");

    let mut tx = crate::db::begin_write(pool).await?;
    for (run, sum) in per_run {
        sqlx::query(
            "update workload_run set util_sum = util_sum + $1, util_samples = util_samples + $2
             where workload_run_id = $3",
        )
        .bind(sum.percent)
        .bind(sum.samples)
        .bind(run)
        .execute(&mut *tx)
        .await?;
    }
    for ((workload, bucket), sum) in per_bucket {
        sqlx::query(
            "insert into utilization_bucket (workload_id, bucket, util_sum, samples)
             values ($1, $2, $3, $4)
             on conflict (workload_id, bucket) do update
             set util_sum = utilization_bucket.util_sum + excluded.util_sum,
                 samples = utilization_bucket.samples + excluded.samples",
        )
        .bind(workload)
        .bind(bucket)
        .bind(sum.percent)
        .bind(sum.samples)
        .execute(&mut *tx)
        .await?;
    }
    // Samples of a day already rolled up (late reports just after midnight) drop its rollup, as a
    // late charge does, so the daily utilization includes them.
    let today = now.div_euclid(scheduler::DAY) * scheduler::DAY;
    if let Some(&(_, earliest)) = per_hour.keys().min_by_key(|(_, hour)| *hour) {
        if earliest < today {
            crate::reports::rollup::invalidate(&mut tx, earliest, today).await?;
        }
    }
    for ((leaf, hour), (sampled, utilized)) in per_hour {
        sqlx::query(
            "insert into usage_hour (budget_node_id, hour, sampled_gpu_s, utilized_gpu_s, cluster_id)
             values ($1, $2, $3, $4, (select cluster_id from node where node_id = $5))
             on conflict (budget_node_id, hour, cluster_id) do update
             set sampled_gpu_s = usage_hour.sampled_gpu_s + excluded.sampled_gpu_s,
                 utilized_gpu_s = usage_hour.utilized_gpu_s + excluded.utilized_gpu_s",
        )
        .bind(leaf)
        .bind(hour)
        .bind(sampled)
        .bind(utilized)
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("update node set gpu_utilization = $1 where node_id = $2")
        .bind(latest)
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// A node's latest sample per GPU, as kept by [`record`]: `(gpu, percent)`.
pub fn parse_latest(text: &str) -> Vec<(u32, f64)> {
    text.split(';')
        .filter_map(|cell| {
            let (gpu, util) = cell.split_once(':')?;
            Some((gpu.parse().ok()?, util.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_nodes_latest_samples_read_back_per_gpu() {
        assert_eq!(super::parse_latest("0:41;1:0.5"), [(0, 41.0), (1, 0.5)]);
        assert!(super::parse_latest("").is_empty());
    }
}
