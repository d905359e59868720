//! Many rows into one table fast: multi-row `insert … values (…), (…)` statements of a few hundred
//! parameters, committed every 50,000 rows, on a connection of its own (the load test's year of
//! history and the demo's month of workloads).

use crate::ServerError;
use sqlx::AnyConnection;

/// The columns of a `workload` row written whole (ended history: the demo's month, the load
/// test's year).
pub const WORKLOAD_COLUMNS: &[&str] = &[
    "workload_id",
    "user_id",
    "budget_node_id",
    "name",
    "command",
    "gpus",
    "min_runtime_s",
    "resumable",
    "priority",
    "state",
    "submitted_at",
    "queued_at",
    "first_started_at",
    "started_at",
    "protected_until",
    "ended_at",
    "exit_code",
    "run_count",
    "progress_s",
    "log_tail",
    "cluster_id",
];

/// The columns of a `usage_hour` cell written whole (on the default cluster).
pub const USAGE_COLUMNS: &[&str] = &[
    "budget_node_id",
    "hour",
    "charged_gpu_s",
    "unallocated_gpu_s",
    "demand_gpu_s",
    "owed_gpu_s",
];

/// The columns of a `workload_run` row written whole.
pub const RUN_COLUMNS: &[&str] = &[
    "workload_id",
    "node_id",
    "gpu_indices",
    "gpus",
    "allocated",
    "started_at",
    "protected_until",
    "charged_through",
    "ended_at",
    "end_kind",
    "released_at",
];

/// One bound value of a bulk insert.
pub enum Value {
    Int(i64),
    MaybeInt(Option<i64>),
    Real(f64),
    Text(String),
}

/// Inserts `rows` into `table` in statements of a few hundred values, in one transaction per
/// 50,000 rows.
pub async fn insert(
    pool_db: &mut AnyConnection,
    table: &str,
    columns: &[&str],
    rows: impl Iterator<Item = Vec<Value>>,
) -> Result<(), ServerError> {
    // sqlx looks up every parameter by name when binding (quadratic in a statement's parameters):
    // a few hundred a statement keeps that small.
    let per_statement = (240 / columns.len()).max(1);
    let mut batch: Vec<Vec<Value>> = Vec::with_capacity(per_statement);
    let mut in_tx = 0usize;
    sqlx::query("begin").execute(&mut *pool_db).await?;
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        batch.clear();
        batch.extend(rows.by_ref().take(per_statement));
        let values = (0..batch.len())
            .map(|r| {
                let cells: Vec<String> = (0..columns.len())
                    .map(|c| format!("${}", r * columns.len() + c + 1))
                    .collect();
                format!("({})", cells.join(", "))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "insert into {table} ({}) values {values}",
            columns.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for row in batch.drain(..) {
            for value in row {
                query = match value {
                    Value::Int(v) => query.bind(v),
                    Value::MaybeInt(v) => query.bind(v),
                    Value::Real(v) => query.bind(v),
                    Value::Text(v) => query.bind(v),
                };
            }
        }
        query.execute(&mut *pool_db).await?;
        in_tx += per_statement;
        if in_tx >= 50_000 {
            sqlx::query("commit").execute(&mut *pool_db).await?;
            sqlx::query("begin").execute(&mut *pool_db).await?;
            in_tx = 0;
        }
    }
    sqlx::query("commit").execute(&mut *pool_db).await?;
    Ok(())
}

/// After rows were inserted with their ids given: PostgreSQL's identity sequences move past
/// them, so the next ordinary insert does not collide (SQLite takes the largest id by itself).
pub async fn resync_ids(
    db: &mut AnyConnection,
    tables: &[(&str, &str)],
) -> Result<(), ServerError> {
    if db.backend_name() != "PostgreSQL" {
        return Ok(());
    }
    for (table, column) in tables {
        sqlx::query(&format!(
            "select setval(pg_get_serial_sequence('{table}', '{column}'), \
             (select coalesce(max({column}), 1) from {table}))"
        ))
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}
