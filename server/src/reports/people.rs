//! Who used a project's time: per person, the GPU-hours their workloads ran under a tree node in a
//! period (funded and free), how many workloads, and the mean utilization of their sampled runs.

use crate::ServerError;
use app::reports::PersonUsage;
use sqlx::{AnyPool, FromRow};
use std::collections::BTreeMap;

#[derive(FromRow)]
struct Run {
    username: String,
    workload_id: i64,
    gpus: i64,
    allocated: i64,
    started_at: i64,
    ended_at: Option<i64>,
    util_sum: f64,
    util_samples: i64,
}

/// The people whose workloads ran under `path` (a project, or a program and everything under it)
/// within `[from, to)`, most GPU-hours first. Each run counts for the part of it inside the
/// period (a running one up to `now`).
pub async fn by_person(
    pool: &AnyPool,
    path: &str,
    from: i64,
    to: i64,
    now: i64,
) -> Result<Vec<PersonUsage>, ServerError> {
    let path = path.trim().trim_matches('/');
    let known: Option<i64> =
        sqlx::query_scalar("select budget_node_id from budget_node where path = $1")
            .bind(path)
            .fetch_optional(pool)
            .await?;
    if known.is_none() || path.is_empty() {
        return Err(ServerError::invalid(
            "path",
            format!("path: there is no project or program \"{path}\"."),
        ));
    }
    let runs: Vec<Run> = sqlx::query_as(
        "select u.username, w.workload_id, r.gpus, r.allocated, r.started_at, r.ended_at,
                r.util_sum, r.util_samples
         from workload_run r
         join workload w on w.workload_id = r.workload_id
         join \"user\" u on u.user_id = w.user_id
         join budget_node b on b.budget_node_id = w.budget_node_id
         where (b.path = $1 or b.path like $2)
           and r.started_at < $3 and (r.ended_at is null or r.ended_at > $4)",
    )
    .bind(path)
    .bind(format!("{path}/%"))
    .bind(to)
    .bind(from)
    .fetch_all(pool)
    .await?;
    #[derive(Default)]
    struct Sum {
        workloads: std::collections::BTreeSet<i64>,
        funded_s: f64,
        free_s: f64,
        util_sum: f64,
        util_samples: i64,
    }
    let mut people: BTreeMap<String, Sum> = BTreeMap::new();
    for run in runs {
        let end = run.ended_at.unwrap_or(now).min(to);
        let seconds = (end - run.started_at.max(from)).max(0) as f64;
        let person = people.entry(run.username).or_default();
        person.workloads.insert(run.workload_id);
        let gpu_s = seconds * run.gpus as f64;
        if run.allocated != 0 {
            person.funded_s += gpu_s;
        } else {
            person.free_s += gpu_s;
        }
        person.util_sum += run.util_sum;
        person.util_samples += run.util_samples;
    }
    let mut out: Vec<PersonUsage> = people
        .into_iter()
        .map(|(username, s)| PersonUsage {
            username,
            workloads: s.workloads.len() as i64,
            delivered_gpu_h: s.funded_s / 3600.0,
            unallocated_gpu_h: s.free_s / 3600.0,
            utilization: (s.util_samples > 0).then(|| s.util_sum / s.util_samples as f64 / 100.0),
        })
        .collect();
    out.sort_by(|a, b| {
        (b.delivered_gpu_h + b.unallocated_gpu_h)
            .total_cmp(&(a.delivered_gpu_h + a.unallocated_gpu_h))
            .then_with(|| a.username.cmp(&b.username))
    });
    Ok(out)
}
