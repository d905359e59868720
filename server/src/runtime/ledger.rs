//! Booking GPU time into the hourly ledger. Each booking moves a persisted cursor forward in the
//! same transaction, so a restart, a retried request or a late report never charges twice, and
//! the time between a crash and the restart is booked when the runtime comes back.

use super::repo;
use crate::{budget::snapshot as tree_snapshot, nodes::repo as node_repo, ServerError};
use scheduler::HOUR;
use sqlx::{AnyConnection, FromRow};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
pub enum Column {
    Charged,
    Unallocated,
    Demand,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Charged => "charged_gpu_s",
            Column::Unallocated => "unallocated_gpu_s",
            Column::Demand => "demand_gpu_s",
        }
    }
}

/// `(hour, seconds)` pieces of `[from, to)` cut at hour boundaries.
pub fn split_hours(from: i64, to: i64) -> Vec<(i64, i64)> {
    let mut pieces = Vec::new();
    let mut t = from;
    while t < to {
        let hour = t.div_euclid(HOUR) * HOUR;
        let end = (hour + HOUR).min(to);
        pieces.push((hour, end - t));
        t = end;
    }
    pieces
}

/// Books `gpus` over `[from, to)` to `leaf`'s hours on `cluster`.
pub async fn book(
    db: &mut AnyConnection,
    cluster: i64,
    leaf: i64,
    column: Column,
    gpus: f64,
    from: i64,
    to: i64,
) -> Result<(), ServerError> {
    crate::reports::rollup::invalidate(db, from, to).await?;
    for (hour, seconds) in split_hours(from, to) {
        let cell = (cluster, leaf, hour, gpus * seconds as f64);
        repo::add_usage(&mut *db, column.name(), cell).await?;
    }
    Ok(())
}

#[derive(Debug, FromRow)]
pub struct RunToCharge {
    workload_run_id: i64,
    budget_node_id: i64,
    gpus: i64,
    #[sqlx(try_from = "crate::db::Flag")]
    allocated: bool,
    charged_through: i64,
    /// The cluster of the node it runs on.
    cluster_id: i64,
}

/// Charges one run up to `now` (no-op when already charged that far).
pub async fn charge_run(
    db: &mut AnyConnection,
    workload_run_id: i64,
    now: i64,
) -> Result<(), ServerError> {
    let run = repo::run_to_charge(&mut *db, workload_run_id).await?;
    if let Some(run) = run {
        charge(db, &run, now).await?;
    }
    Ok(())
}

async fn charge(db: &mut AnyConnection, run: &RunToCharge, now: i64) -> Result<(), ServerError> {
    if now <= run.charged_through {
        return Ok(());
    }
    let column = if run.allocated {
        Column::Charged
    } else {
        Column::Unallocated
    };
    book(
        db,
        run.cluster_id,
        run.budget_node_id,
        column,
        run.gpus as f64,
        run.charged_through,
        now,
    )
    .await?;
    repo::set_charged_through(&mut *db, run.workload_run_id, now).await?;
    Ok(())
}

/// Books everything up to `now`: every open run, the allocated demand of each leaf, and the
/// healthy capacity, with a number of statements that grows with the leaves and hours booked,
/// not with the runs: at a few thousand runs, one statement per run made every pass (and, when
/// submissions booked too, every submission) slow.
pub async fn accrue(db: &mut AnyConnection, now: i64) -> Result<(), ServerError> {
    accrue_in_pass(db, now, 0).await
}

/// [`accrue`] as the runtime's pass calls it, once per pass inside its write transaction (write
/// transactions run one at a time): open runs and capacity are booked every time, the hours'
/// demand and what is owed only once they are `demand_every_s` behind (the runtime's setting,
/// 30 s) or an hour has ended. Demand sums every queued workload: at 50,000 queued, summed at
/// every pass (about ten a second) it was most of the write transaction, which agents' heartbeats
/// and submissions wait behind. It is still booked to the second, from each workload's own
/// submission and end.
pub async fn accrue_in_pass(
    db: &mut AnyConnection,
    now: i64,
    demand_every_s: i64,
) -> Result<(), ServerError> {
    charge_open_runs(db, now).await?;
    let demand_through = repo::ledger_cursor(&mut *db, DEMAND).await?;
    // Capacity was booked with demand, on its cursor, before it had one of its own.
    let capacity_from = match repo::ledger_cursor(&mut *db, CAPACITY).await? {
        Some(through) => through,
        None => demand_through.unwrap_or(now),
    };
    if now > capacity_from {
        book_capacity(db, capacity_from, now).await?;
        crate::reports::rollup::invalidate(db, capacity_from, now).await?;
    }
    repo::set_ledger_cursor(&mut *db, CAPACITY, now.max(capacity_from)).await?;
    let from = demand_through.unwrap_or(now);
    let hour_ended = from.div_euclid(HOUR) != now.div_euclid(HOUR);
    if demand_through.is_none() || now - from >= demand_every_s || hour_ended {
        if now > from {
            book_demand(db, from, now).await?;
            refresh_owed(db, from, now).await?;
            crate::reports::rollup::invalidate(db, from, now).await?;
        }
        repo::set_ledger_cursor(&mut *db, DEMAND, now.max(from)).await?;
    }
    Ok(())
}

/// The ledger's cursors: how far demand (and owed), and capacity, are booked.
const DEMAND: &str = "demand";
const CAPACITY: &str = "capacity";

/// Books each cluster's healthy GPU-seconds over `[from, to)`, at the nodes' health now.
async fn book_capacity(db: &mut AnyConnection, from: i64, to: i64) -> Result<(), ServerError> {
    let healthy = node_repo::healthy_gpus(&mut *db).await?;
    for (hour, seconds) in split_hours(from, to) {
        for &(cluster, gpus) in &healthy {
            repo::add_capacity(&mut *db, cluster, hour, (gpus * seconds) as f64).await?;
        }
    }
    Ok(())
}

/// Charges every open run up to `now`: the GPU-seconds summed per cluster, leaf and hour, one upsert each,
/// then every run's cursor moved to `now` in one statement.
async fn charge_open_runs(db: &mut AnyConnection, now: i64) -> Result<(), ServerError> {
    let runs = repo::runs_to_charge(&mut *db, now).await?;
    let Some(earliest) = runs.iter().map(|r| r.charged_through).min() else {
        return Ok(());
    };
    let mut sums: BTreeMap<(i64, i64, bool, i64), f64> = BTreeMap::new();
    for run in &runs {
        for (hour, seconds) in split_hours(run.charged_through, now) {
            *sums
                .entry((run.cluster_id, run.budget_node_id, run.allocated, hour))
                .or_default() += run.gpus as f64 * seconds as f64;
        }
    }
    crate::reports::rollup::invalidate(db, earliest, now).await?;
    for column in [Column::Charged, Column::Unallocated] {
        let allocated = matches!(column, Column::Charged);
        let cells: Vec<repo::Cell> = sums
            .iter()
            .filter(|((_, _, a, _), _)| *a == allocated)
            .map(|(&(cluster, leaf, _, hour), &gpu_s)| (cluster, leaf, hour, gpu_s))
            .collect();
        repo::add_usage_many(&mut *db, column.name(), &cells).await?;
    }
    // Exactly the runs read above: write transactions run one at a time, so none opened, ended or
    // was charged in between.
    repo::advance_open_runs(&mut *db, now).await?;
    Ok(())
}

/// Books each leaf's allocated demand over `[from, to)` (DESIGN §5: the GPUs of its allocated
/// workloads queued or running), hour by hour, from the workloads' own times: each counts from its
/// submission until it ended, so a submission, a cancel or an end between two passes is booked
/// to the second without booking anything when it happens.
async fn book_demand(db: &mut AnyConnection, from: i64, to: i64) -> Result<(), ServerError> {
    for (hour, seconds) in split_hours(from, to) {
        let a = hour.max(from);
        let b = a + seconds;
        let demand = repo::allocated_demand(&mut *db, a, b).await?;
        let cells: Vec<repo::Cell> = demand
            .into_iter()
            .filter(|&(_, gpu_s)| gpu_s > 0)
            .map(|((cluster, leaf), gpu_s)| (cluster, leaf, hour, gpu_s as f64))
            .collect();
        repo::add_usage_many(&mut *db, Column::Demand.name(), &cells).await?;
    }
    Ok(())
}

/// Owed to a leaf in hour h on a cluster (DESIGN §5) = min(f · C_h, demand_h) with that cluster's
/// capacity and the leaf's demand there (the tree's shares apply on every cluster), recomputed
/// from the hour's totals for every hour in `[from, to)` so reports only sum it.
async fn refresh_owed(db: &mut AnyConnection, from: i64, to: i64) -> Result<(), ServerError> {
    let Some(trees) = tree_snapshot::load_trees(db).await? else {
        return Ok(());
    };
    for (hour, _) in split_hours(from, to) {
        let capacity = repo::capacity_at(&mut *db, hour).await?;
        let leaves = repo::demand_at(&mut *db, hour).await?;
        let owed: Vec<repo::Cell> = leaves
            .into_iter()
            .map(|(cluster, leaf, demand)| {
                let tree = trees.of(cluster);
                let fraction = tree
                    .engine_id(leaf)
                    .map(|id| tree.tree.version_at(hour).fraction(id))
                    .unwrap_or(0.0);
                let capacity = capacity.get(&cluster).copied().unwrap_or(0.0);
                (cluster, leaf, hour, (fraction * capacity).min(demand))
            })
            .collect();
        repo::set_owed_many(&mut *db, &owed).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::split_hours;

    #[test]
    fn a_span_is_cut_at_every_hour_boundary() {
        assert_eq!(
            split_hours(3_500, 7_300),
            vec![(0, 100), (3_600, 3_600), (7_200, 100)]
        );
        assert_eq!(split_hours(10, 10), vec![]);
    }
}
