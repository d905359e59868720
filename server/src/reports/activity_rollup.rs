//! The activity chart's finished hours, rolled up once. An hour's activity is settled once it is
//! over: runs, cancels and stops are written as they happen, at most seconds late (a silent node's
//! runs end at its deadline), so hours are rolled up when they ended at least [`LAG`] ago. The
//! rollup walks forward a day at a time from the first submission, carrying the workloads still
//! waiting where it stopped: a day's work reads only those, the workloads submitted, stopped or
//! first started in it, and its preemptions — never the whole history. The runtime keeps it up a
//! step per pass, in the background; a read finishes whatever is left.

use super::{activity_hours, repo};
use crate::ServerError;
use app::workloads::reasons::StopRule;
use scheduler::{DAY, HOUR};
use sqlx::{AnyConnection, AnyPool};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// Held while this process rolls up (see [`ensure`]).
static ROLLING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long after an hour ends it is rolled up.
pub const LAG: i64 = HOUR;
/// The most one step rolls up.
const SPAN: i64 = DAY;

/// Rolls up every hour that ended [`LAG`] ago or more; returns where the rollup ends (`None`:
/// nothing was ever submitted).
pub async fn ensure(pool: &AnyPool, now: i64) -> Result<Option<i64>, ServerError> {
    // One roller per process: readers arriving together (a page's first load after an hour
    // ends) wait for it and find the work done, instead of each reading the same day.
    let _rolling = ROLLING.lock().await;
    loop {
        let (upto, done) = step(pool, now).await?;
        if done {
            return Ok(upto);
        }
    }
}

/// One step in the background, for the runtime's pass: the pass never waits on it (a step with
/// 50,000 workloads waiting reads them all). Skipped while the previous one still runs.
/// Skipped while the previous one still runs, and while `known` (where the last step left the
/// rollup) shows nothing is due: a pass then costs no database work.
pub fn spawn_step(pool: AnyPool, now: i64, known: Arc<AtomicI64>, running: Arc<AtomicBool>) {
    if known.load(Ordering::Acquire) >= target(now) || running.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async move {
        // A reader rolling up already does this step's work.
        if let Ok(_rolling) = ROLLING.try_lock() {
            match step(&pool, now).await {
                Ok((Some(upto), _)) => known.store(upto, Ordering::Release),
                Ok((None, _)) => {}
                Err(error) => tracing::warn!(
                    %error,
                    "rolling up the activity chart's hours failed; the next pass tries again"
                ),
            }
        }
        running.store(false, Ordering::Release);
    });
}

/// The end of the last hour that is due to be rolled up at `now`.
pub fn target(now: i64) -> i64 {
    (now - LAG).div_euclid(HOUR) * HOUR
}

/// Whether hours are due to be rolled up at `now` after `upto` (what [`upto`] read).
pub fn behind(upto: Option<i64>, now: i64) -> bool {
    upto.is_none_or(|u| u < target(now))
}

/// Where the rollup ends, if it ever began.
pub async fn upto(db: &mut AnyConnection) -> Result<Option<i64>, ServerError> {
    Ok(
        sqlx::query_scalar("select upto from activity_rollup where id = 1")
            .fetch_optional(&mut *db)
            .await?,
    )
}

/// The rolled-up hours in `[from, to)`.
pub async fn read(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
) -> Result<BTreeMap<i64, activity_hours::HourActivity>, ServerError> {
    let rows: Vec<(i64, i64, i64, i64, Vec<u8>, String)> = sqlx::query_as(
        "select hour, waited_s, waited_gpu_s, peak, waits, stops from activity_hour
         where hour >= $1 and hour < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut *db)
    .await?;
    let mut out = BTreeMap::new();
    for (hour, waited_s, waited_gpu_s, peak, waits, stops) in rows {
        let stops: Vec<(StopRule, u64)> =
            serde_json::from_str(&stops).map_err(|error| sqlx::Error::Decode(Box::new(error)))?;
        out.insert(
            hour,
            activity_hours::HourActivity {
                waited_s,
                waited_gpu_s,
                peak: peak as u32,
                waits: unpack(&waits),
                stops: stops.into_iter().collect(),
            },
        );
    }
    Ok(out)
}

fn pack(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn unpack(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

/// Rolls up at most [`SPAN`] more; returns where the rollup ends and whether it is up to date.
/// Reads without a transaction (the hours it rolls up ended [`LAG`] ago and no longer change), then
/// writes them in a short one, only if no one else moved the rollup meanwhile.
async fn step(pool: &AnyPool, now: i64) -> Result<(Option<i64>, bool), ServerError> {
    let target = target(now);
    let mut db = pool.acquire().await?;
    let state: Option<(i64, Vec<u8>)> =
        sqlx::query_as("select upto, waiting from activity_rollup where id = 1")
            .fetch_optional(&mut *db)
            .await?;
    let began = state.is_some();
    let (upto, carry) = match state {
        Some((upto, waiting)) => (upto, unpack(&waiting)),
        None => {
            let first: Option<i64> = sqlx::query_scalar("select min(submitted_at) from workload")
                .fetch_one(&mut *db)
                .await?;
            let Some(first) = first else {
                return Ok((None, true));
            };
            (first.div_euclid(HOUR) * HOUR, Vec::new())
        }
    };
    if upto >= target && began {
        return Ok((Some(upto), true));
    }
    let mut from = upto.min(target);
    if carry.is_empty() {
        // Nothing waits: hours before the next submission, stop or start hold nothing.
        from = match next_event(&mut db, from).await? {
            Some(t) => (t.div_euclid(HOUR) * HOUR).clamp(from, target),
            None => target,
        };
    }
    let to = (from + SPAN).min(target).max(from);
    let (hours, waiting) = if from < to {
        roll(&mut db, from, to, &carry, now).await?
    } else {
        (BTreeMap::new(), Vec::new())
    };
    drop(db);
    let mut tx = crate::db::begin_write(pool).await?;
    if save(&mut tx, began, upto, to, &waiting).await? {
        write_hours(&mut tx, from, to, &hours).await?;
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok((Some(to), to >= target))
}

/// The first submission, run end, first start or stop at or after `t`.
async fn next_event(db: &mut AnyConnection, t: i64) -> Result<Option<i64>, ServerError> {
    let mut next: Option<i64> = None;
    for query in [
        "select min(submitted_at) from workload where submitted_at >= $1",
        "select min(ended_at) from workload_run where ended_at >= $1",
        "select min(first_started_at) from workload where first_started_at >= $1",
        "select min(at) from workload_event where kind in ('preempted', 'drained') and at >= $1",
    ] {
        let found: Option<i64> = sqlx::query_scalar(query)
            .bind(t)
            .fetch_one(&mut *db)
            .await?;
        next = match (next, found) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(next)
}

/// The hours of `[from, to)` given the workloads waiting at `from`, and those waiting at `to`.
async fn roll(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
    carry: &[i64],
    now: i64,
) -> Result<(BTreeMap<i64, activity_hours::HourActivity>, Vec<i64>), ServerError> {
    let mut ids = carry.to_vec();
    for query in [
        "select workload_id from workload where submitted_at >= $1 and submitted_at < $2",
        "select workload_id from workload_run where ended_at >= $1 and ended_at < $2",
        "select workload_id from workload where first_started_at >= $1 and first_started_at < $2",
    ] {
        let found: Vec<i64> = sqlx::query_scalar(query)
            .bind(from)
            .bind(to)
            .fetch_all(&mut *db)
            .await?;
        ids.extend(found);
    }
    ids.sort_unstable();
    ids.dedup();
    let workloads = repo::workloads_by_id(db, &ids).await?;
    let runs = repo::runs_by_workload(db, &ids).await?;
    let stops = repo::stops_between(&mut *db, from, to).await?;
    let hours = activity_hours::hours(&workloads, &runs, &stops, from, to, now)?;
    let waiting = activity_hours::waiting_at(&workloads, &runs, to, now);
    Ok((hours, waiting))
}

async fn write_hours(
    db: &mut AnyConnection,
    from: i64,
    to: i64,
    hours: &BTreeMap<i64, activity_hours::HourActivity>,
) -> Result<(), ServerError> {
    sqlx::query("delete from activity_hour where hour >= $1 and hour < $2")
        .bind(from)
        .bind(to)
        .execute(&mut *db)
        .await?;
    for (hour, cell) in hours.iter().filter(|(_, c)| !c.is_empty()) {
        let stops: Vec<(StopRule, u64)> = cell.stops.iter().map(|(r, n)| (*r, *n)).collect();
        sqlx::query(
            "insert into activity_hour (hour, waited_s, waited_gpu_s, peak, waits, stops)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(hour)
        .bind(cell.waited_s)
        .bind(cell.waited_gpu_s)
        .bind(i64::from(cell.peak))
        .bind(pack(&cell.waits))
        .bind(serde_json::to_string(&stops).unwrap_or_else(|_| "[]".into()))
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// Moves the rollup from `was` to `upto`; false if someone else moved it first.
async fn save(
    db: &mut AnyConnection,
    began: bool,
    was: i64,
    upto: i64,
    waiting: &[i64],
) -> Result<bool, ServerError> {
    let moved = if began {
        sqlx::query("update activity_rollup set upto = $1, waiting = $2 where id = 1 and upto = $3")
            .bind(upto)
            .bind(pack(waiting))
            .bind(was)
            .execute(&mut *db)
            .await?
    } else {
        sqlx::query(
            "insert into activity_rollup (id, upto, waiting) values (1, $1, $2)
             on conflict (id) do nothing",
        )
        .bind(upto)
        .bind(pack(waiting))
        .execute(&mut *db)
        .await?
    };
    Ok(moved.rows_affected() == 1)
}
