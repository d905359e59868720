//! The waits the quarterly review reports (DESIGN §5: submission to first start), rolled up by the
//! day workloads first started. A first start is written once, when it happens, so a finished
//! day's rollup never changes and is never redone. One row holds a day's waits on one cluster. A review of `[from, to)` reads the rolled-up
//! days that hold something submitted in the period (`min_submitted`), today's first starts from
//! the workloads, and the workloads that never started (still queued, or cancelled first), which
//! wait until the period's end.

use crate::ServerError;
use scheduler::{
    sim::{DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME},
    DAY, HOUR,
};
use sqlx::{AnyConnection, FromRow};
use std::collections::BTreeMap;

/// One workload's wait, under its leaf (a database id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub leaf: i64,
    /// The cluster it ran (or waits) on.
    pub cluster: i64,
    pub submitted_at: i64,
    pub wait_s: i64,
    /// Debug work as DESIGN §5 counts it (short protection, few GPUs).
    pub debug: bool,
}

#[derive(FromRow)]
struct Row {
    budget_node_id: i64,
    cluster_id: i64,
    submitted_at: i64,
    first_started_at: Option<i64>,
    min_runtime_s: i64,
    gpus: i64,
}

impl Row {
    fn wait(&self, end: i64) -> Wait {
        Wait {
            leaf: self.budget_node_id,
            cluster: self.cluster_id,
            submitted_at: self.submitted_at,
            wait_s: self.first_started_at.unwrap_or(end).max(self.submitted_at) - self.submitted_at,
            debug: self.min_runtime_s > 0
                && self.min_runtime_s <= DEBUG_MAX_MIN_RUNTIME
                && self.gpus <= i64::from(DEBUG_MAX_GPUS),
        }
    }
}

const COLUMNS: &str =
    "budget_node_id, cluster_id, submitted_at, first_started_at, min_runtime_s, gpus";

/// Each entry: the leaf, the submission time, then the wait shifted left once with the debug flag
/// in bit 0 (8 bytes each).
const ENTRY: usize = 24;

fn pack(waits: &[Wait]) -> Vec<u8> {
    let mut out = Vec::with_capacity(waits.len() * ENTRY);
    for w in waits {
        out.extend_from_slice(&w.leaf.to_le_bytes());
        out.extend_from_slice(&w.submitted_at.to_le_bytes());
        out.extend_from_slice(&((w.wait_s << 1) | i64::from(w.debug)).to_le_bytes());
    }
    out
}

fn unpack(cluster: i64, bytes: &[u8], out: &mut Vec<Wait>, from: i64, to: i64) {
    let word = |b: &[u8]| i64::from_le_bytes(b.try_into().unwrap_or_default());
    for entry in bytes.chunks_exact(ENTRY) {
        let submitted_at = word(&entry[8..16]);
        if submitted_at < from || submitted_at >= to {
            continue;
        }
        let packed = word(&entry[16..]);
        out.push(Wait {
            leaf: word(&entry[..8]),
            cluster,
            submitted_at,
            wait_s: packed >> 1,
            debug: packed & 1 == 1,
        });
    }
}

/// Rolls up every finished day before `today` from `first` on that is not rolled up yet.
pub async fn ensure(db: &mut AnyConnection, first: i64, now: i64) -> Result<(), ServerError> {
    let today = now.div_euclid(DAY) * DAY;
    // Nothing to roll up before the first start of all (periods reaching back before the
    // history cost nothing and write nothing).
    let (since,): (Option<i64>,) = sqlx::query_as("select min(first_started_at) from workload")
        .fetch_one(&mut *db)
        .await?;
    let Some(since) = since else {
        return Ok(());
    };
    let first = first.max(since).div_euclid(DAY) * DAY;
    if first >= today {
        return Ok(());
    }
    let done: Vec<i64> =
        sqlx::query_scalar("select day from wait_rollup_day where day >= $1 and day < $2")
            .bind(first)
            .bind(today)
            .fetch_all(&mut *db)
            .await?;
    let mut day = first;
    while day < today {
        if !done.contains(&day) {
            roll_up(db, day, now).await?;
        }
        day += DAY;
    }
    Ok(())
}

async fn roll_up(db: &mut AnyConnection, day: i64, now: i64) -> Result<(), ServerError> {
    sqlx::query("delete from wait_day where day = $1")
        .bind(day)
        .execute(&mut *db)
        .await?;
    // Two readers may roll up the same finished day at once; both compute the same waits.
    write_span(db, "wait_day", "day", day, day + DAY).await?;
    sqlx::query(
        "insert into wait_rollup_day (day, rolled_at) values ($1, $2)
         on conflict (day) do update set rolled_at = excluded.rolled_at",
    )
    .bind(day)
    .bind(now)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// The first starts of `[start, end)` into `table` (`wait_day` or `wait_hour`, keyed by `key` and
/// cluster), one row per cluster: a review reads a quarter's days whole, and rows cost more than
/// bytes.
async fn write_span(
    db: &mut AnyConnection,
    table: &str,
    key: &str,
    start: i64,
    end: i64,
) -> Result<(), ServerError> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "select {COLUMNS} from workload where first_started_at >= $1 and first_started_at < $2"
    ))
    .bind(start)
    .bind(end)
    .fetch_all(&mut *db)
    .await?;
    let mut by_cluster: BTreeMap<i64, Vec<Wait>> = BTreeMap::new();
    for row in &rows {
        by_cluster
            .entry(row.cluster_id)
            .or_default()
            .push(row.wait(end));
    }
    for (cluster, waits) in by_cluster {
        let min_submitted = waits.iter().map(|w| w.submitted_at).min().unwrap_or(start);
        sqlx::query(&format!(
            "insert into {table} (cluster_id, {key}, min_submitted, waits)
             values ($1, $2, $3, $4)
             on conflict ({key}, cluster_id) do update
             set min_submitted = excluded.min_submitted, waits = excluded.waits"
        ))
        .bind(cluster)
        .bind(start)
        .bind(min_submitted)
        .bind(pack(&waits))
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// How long after an hour ends today's hourly rollup takes it in: a first start is written by the
/// pass that made it, seconds later at most.
const HOUR_LAG: i64 = 5 * 60;

/// Rolls up today's hours that ended [`HOUR_LAG`] ago or more and are not rolled up yet (one row
/// per hour and cluster, as the days), dropping earlier days' hours, which the days now hold.
/// Returns where the rolled-up hours end.
async fn ensure_hours(db: &mut AnyConnection, now: i64) -> Result<i64, ServerError> {
    let today = now.div_euclid(DAY) * DAY;
    let through = ((now - HOUR_LAG).div_euclid(HOUR) * HOUR).max(today);
    let done: Vec<i64> =
        sqlx::query_scalar("select hour from wait_rollup_hour where hour >= $1 and hour < $2")
            .bind(today)
            .bind(through)
            .fetch_all(&mut *db)
            .await?;
    if done.len() as i64 == (through - today) / HOUR {
        return Ok(through);
    }
    for table in ["wait_hour", "wait_rollup_hour"] {
        sqlx::query(&format!("delete from {table} where hour < $1"))
            .bind(today)
            .execute(&mut *db)
            .await?;
    }
    let mut hour = today;
    while hour < through {
        if !done.contains(&hour) {
            write_span(db, "wait_hour", "hour", hour, hour + HOUR).await?;
            sqlx::query(
                "insert into wait_rollup_hour (hour) values ($1) on conflict (hour) do nothing",
            )
            .bind(hour)
            .execute(&mut *db)
            .await?;
        }
        hour += HOUR;
    }
    Ok(through)
}

/// The waits of the workloads submitted in `[from, to)` as of `now`: those that started by their
/// first start, the others until the period's end (or now, if sooner).
pub async fn submitted_between(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
    now: i64,
) -> Result<Vec<Wait>, ServerError> {
    let today = now.div_euclid(DAY) * DAY;
    ensure(db, from, now).await?;
    let mut out = Vec::new();
    let rolled: Vec<(i64, Vec<u8>)> = sqlx::query_as(
        "select cluster_id, waits from wait_day
         where day >= $1 and day < $2 and min_submitted < $3",
    )
    .bind(from.div_euclid(DAY) * DAY)
    .bind(today)
    .bind(to)
    .fetch_all(&mut *db)
    .await?;
    for (cluster, bytes) in &rolled {
        unpack(*cluster, bytes, &mut out, from, to);
    }
    // Today's finished hours, then the last hour or so from the workloads.
    let through = ensure_hours(db, now).await?;
    let hours: Vec<(i64, Vec<u8>)> = sqlx::query_as(
        "select cluster_id, waits from wait_hour
         where hour >= $1 and hour < $2 and min_submitted < $3",
    )
    .bind(today)
    .bind(through)
    .bind(to)
    .fetch_all(&mut *db)
    .await?;
    for (cluster, bytes) in &hours {
        unpack(*cluster, bytes, &mut out, from, to);
    }
    let end = to.min(now);
    // The latest first starts, filtered here: given the period too, a planner may walk the
    // period's submissions instead (SQLite did, 1.3 s at a million).
    let recent: Vec<Row> = sqlx::query_as(&format!(
        "select {COLUMNS} from workload where first_started_at >= $1"
    ))
    .bind(through.max(from))
    .fetch_all(&mut *db)
    .await?;
    let recent = recent
        .into_iter()
        .filter(|r| r.submitted_at >= from && r.submitted_at < to);
    let waiting: Vec<Row> = sqlx::query_as(&format!(
        "select {COLUMNS} from workload
         where first_started_at is null and submitted_at >= $1 and submitted_at < $2"
    ))
    .bind(from)
    .bind(to)
    .fetch_all(&mut *db)
    .await?;
    out.extend(recent.chain(waiting).map(|r| r.wait(end)));
    Ok(out)
}

/// Rolls up yesterday (and the two days before) if not yet done: the runtime calls this every
/// pass, as it does for the ledger's rollups.
pub async fn keep_up(db: &mut AnyConnection, now: i64) -> Result<(), ServerError> {
    let yesterday = now.div_euclid(DAY) * DAY - DAY;
    let done: Option<i64> = sqlx::query_scalar("select day from wait_rollup_day where day = $1")
        .bind(yesterday)
        .fetch_optional(&mut *db)
        .await?;
    if done.is_none() {
        ensure(db, yesterday - 2 * DAY, now).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_waits_come_back_as_they_went_in_with_their_leaves_and_only_those_submitted_in_the_period(
    ) {
        let waits = [
            Wait {
                leaf: 7,
                cluster: 2,
                submitted_at: 1_000,
                wait_s: 0,
                debug: true,
            },
            Wait {
                leaf: 9,
                cluster: 2,
                submitted_at: -5,
                wait_s: 86_400 * 40,
                debug: false,
            },
            Wait {
                leaf: 7,
                cluster: 2,
                submitted_at: 2_000,
                wait_s: 17,
                debug: false,
            },
        ];
        let bytes = pack(&waits);
        assert_eq!(bytes.len(), 3 * ENTRY);
        let mut out = Vec::new();
        unpack(2, &bytes, &mut out, i64::MIN, i64::MAX);
        assert_eq!(out, waits);
        out.clear();
        unpack(2, &bytes, &mut out, 0, 2_000);
        assert_eq!(out, [waits[0]]);
    }
}
