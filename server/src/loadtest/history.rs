//! `hourglass loadtest-history`: a year of history at scale, written straight into a database, then
//! the pages that read history timed on it, the retention pass run over it, and the database's
//! size before and after. It prints what it measured, then one JSON object on its last line.
//!
//! The history is generated, not scheduled: the simulator would take hours for a year of 8,192
//! GPUs, and what is measured here is how the storage and the reports scale with the rows a year
//! leaves behind. Its shape follows the reference: many short debug workloads (1–8 GPUs, minutes),
//! fewer multi-host training runs (hours, resumable, sometimes preempted and requeued), free sweeps
//! (`min_runtime = 0`, unallocated), every state change an event as the runtime writes it, every
//! workload some output, and the hourly ledger and capacity that those runs book.

use super::{people::Dice, seed};
use crate::{
    budget::{snapshot as tree_snapshot, view::tree_view},
    bulk_insert::{insert, Value, RUN_COLUMNS, USAGE_COLUMNS, WORKLOAD_COLUMNS},
    db,
    reports::{review, rollup, usage},
    runtime::{config::RuntimeConfig, Runtime},
    workloads::retention::{self, Retention},
    ServerError,
};
use app::{
    model::{CurrentUser, Role},
    workloads::{
        reasons::{AfterStop, Event, Party, PreemptRule, Preemption},
        GpuPlacement,
    },
};
use clap::Args;
use scheduler::{DAY, HOUR};
use serde::Serialize;
use sqlx::{AnyConnection, AnyPool};
use std::{collections::HashMap, time::Instant};

#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// Days of history, ending now.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub days: u32,
    /// GPU nodes the history ran on.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub gpus_per_node: u32,
    /// Teams (leaves of the tree), 15 to a program.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u32).range(2..=10_000))]
    pub leaves: u32,
    /// Workloads submitted per day for every 1,024 GPUs (about seven in ten debug runs).
    #[arg(long, default_value_t = 1_400, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub workloads_per_day: u32,
    /// Output kept per workload, in bytes, on average (training keeps more, debug less).
    #[arg(long, default_value_t = 1_024)]
    pub output_bytes: u32,
    /// Measure again on a database an earlier run of this command filled (given with
    /// `--database`), without writing the history again.
    #[arg(long)]
    pub again: bool,
}

/// One generated workload with its runs and events, ready to insert.
struct Generated {
    workloads: Vec<WorkloadRow>,
    runs: Vec<RunRow>,
    events: Vec<(i64, i64, &'static str, Option<i64>, String)>,
    /// Per (leaf index, hour index): charged, unallocated, demanded GPU-seconds.
    usage: Vec<[f64; 3]>,
}

struct WorkloadRow {
    id: i64,
    team: usize,
    class: Class,
    gpus: i64,
    min_runtime_s: i64,
    submitted_at: i64,
    first_started_at: i64,
    started_at: i64,
    ended_at: i64,
    state: &'static str,
    exit_code: Option<i64>,
    run_count: i64,
    progress_s: i64,
    output: usize,
}

struct RunRow {
    workload_id: i64,
    node_id: i64,
    gpus: i64,
    allocated: bool,
    started_at: i64,
    protected_until: Option<i64>,
    ended_at: i64,
    end_kind: &'static str,
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Debug,
    Training,
    Sweep,
}

/// What was measured, as the last line prints it.
#[derive(Debug, Serialize)]
pub struct HistoryReport {
    pub database: &'static str,
    pub days: u32,
    pub gpus: u32,
    pub workloads: usize,
    pub runs: usize,
    pub events: usize,
    pub usage_cells: usize,
    pub generate_s: f64,
    pub rollup_s: f64,
    pub db_mb_before_retention: f64,
    pub db_mb_per_month: f64,
    pub retention_s: f64,
    pub outputs_cleared: u64,
    pub events_deleted: u64,
    pub db_mb_after_retention: f64,
    pub review_p50_ms: f64,
    pub review_max_ms: f64,
    pub usage_csv_year_p50_ms: f64,
    pub usage_csv_week_hourly_p50_ms: f64,
    pub tree_page_p50_ms: f64,
    pub activity_quarter_p50_ms: f64,
}

pub async fn run(database: Option<&str>, args: HistoryArgs) -> Result<(), ServerError> {
    let dir = tempfile::tempdir()?;
    let url = match database {
        Some(url) => url.to_string(),
        None => format!("sqlite://{}", dir.path().join("history.db").display()),
    };
    let pool = db::open(&url).await?;
    let people = crate::demo::repo::usernames(&pool).await?.len();
    if args.again {
        if people == 0 || database.is_none() {
            return Err(ServerError::Config(
                "--again measures a database an earlier run filled: name it with --database".into(),
            ));
        }
    } else if people > 0 {
        return Err(ServerError::Config(format!(
            "the history load test fills the database with a year of its own history; {} already \
             has people: give it an empty database (or none, for a temporary SQLite file)",
            db::redacted(&url)
        )));
    }
    let now = crate::clock::Clock::system().now();
    let end = now.div_euclid(HOUR) * HOUR;
    let mut start = end.div_euclid(DAY) * DAY - i64::from(args.days) * DAY;
    let gpus = args.nodes * args.gpus_per_node;
    let engine = super::engine_name(&url);
    println!(
        "history load test: {} days of {} nodes × {} GPUs, {} teams, {} workloads a day per 1,024 \
         GPUs, on {engine}",
        args.days, args.nodes, args.gpus_per_node, args.leaves, args.workloads_per_day
    );
    let mut db = pool.acquire().await?;
    let clock = Instant::now();
    if args.again {
        start = crate::reports::repo::first_capacity_hour(&mut *db)
            .await?
            .unwrap_or(start);
    } else {
        let teams = seed::organisation(&pool, args.leaves, start).await?;
        seed::nodes(&pool, args.nodes, start).await?;
        let generated = generate(&args, &teams, start, end);
        let ids = Ids::read(&mut db, &teams).await?;
        write(&mut db, &args, &generated, &ids, start, end).await?;
    }
    let generate_s = clock.elapsed().as_secs_f64();
    let count = |table: &'static str| {
        let query = format!("select count(*) from {table}");
        let pool = pool.clone();
        async move { sqlx::query_scalar::<_, i64>(&query).fetch_one(&pool).await }
    };
    let (workloads, runs, events, cells) = (
        count("workload").await? as usize,
        count("workload_run").await? as usize,
        count("workload_event").await? as usize,
        count("usage_hour").await? as usize,
    );
    println!(
        "{} {workloads} workloads, {runs} runs, {events} events and {cells} ledger cells in \
         {generate_s:.1} s",
        if args.again { "found" } else { "wrote" }
    );

    // The runtime rolls up each day as it ends; here the whole year at once, timed.
    let clock = Instant::now();
    let tree = tree_snapshot::load(&mut db)
        .await?
        .ok_or_else(|| ServerError::Config("the organisation was not imported".into()))?;
    let mut tx = db::begin_write(&pool).await?;
    rollup::ensure(&mut tx, &tree, start, end, now).await?;
    crate::reports::waits::ensure(&mut tx, start, now).await?;
    tx.commit().await?;
    crate::reports::activity_rollup::ensure(&pool, now).await?;
    let rollup_s = clock.elapsed().as_secs_f64();
    println!(
        "rolled up {} days (ledger, waits, activity by hour) in {rollup_s:.1} s",
        args.days
    );
    drop(db);

    let size_before = database_mb(&pool, &url).await?;
    // The pages, on a runtime that does not decide (nothing runs; history is what is read).
    let runtime = Runtime::new(
        db::connect_control(&url).await?,
        crate::settings::load(&pool, RuntimeConfig::default()).await?,
    );
    let admin = CurrentUser {
        id: 0,
        username: "history".into(),
        role: Role::Admin,
    };
    let mut reviews = Vec::new();
    let mut quarter_start = start;
    while quarter_start < end {
        let (from, to) = quarter_of(quarter_start);
        let mut times = Vec::new();
        for _ in 0..3 {
            let clock = Instant::now();
            review::review(&pool, from, to, String::new(), now).await?;
            times.push(clock.elapsed());
        }
        println!(
            "quarterly review from {}: {:.0} ms, then {:.0} and {:.0} ms",
            app::calendar::format_date(from),
            times[0].as_secs_f64() * 1e3,
            times[1].as_secs_f64() * 1e3,
            times[2].as_secs_f64() * 1e3
        );
        reviews.extend(times);
        quarter_start = to;
    }
    // The Reports page's activity chart (daily buckets) over the quarter before the current one.
    let last_quarter = match quarter_of(quarter_of(end).0 - 1) {
        (from, to) if to > start => (from.max(start), to),
        // A history shorter than that: the current quarter so far.
        _ => (quarter_of(end).0.max(start), end),
    };
    let mut activity = Vec::new();
    for _ in 0..3 {
        let clock = Instant::now();
        crate::reports::activity::activity(
            &pool,
            last_quarter.0,
            last_quarter.1,
            usage::parse_granularity("day")?,
            now,
        )
        .await?;
        activity.push(clock.elapsed());
    }
    let mut year_csv = Vec::new();
    let mut week_csv = Vec::new();
    let mut tree_pages = Vec::new();
    for _ in 0..3 {
        let clock = Instant::now();
        let series = usage::series(
            &pool,
            "",
            None,
            end - 365 * DAY,
            end,
            usage::parse_granularity("day")?,
            now,
        )
        .await?;
        let utilization = usage::utilization(
            &pool,
            "",
            None,
            end - 365 * DAY,
            end,
            usage::parse_granularity("day")?,
        )
        .await?;
        usage::csv(&series, &utilization);
        year_csv.push(clock.elapsed());
        let clock = Instant::now();
        let series = usage::series(
            &pool,
            "",
            None,
            end - 7 * DAY,
            end,
            usage::parse_granularity("hour")?,
            now,
        )
        .await?;
        let utilization = usage::utilization(
            &pool,
            "",
            None,
            end - 7 * DAY,
            end,
            usage::parse_granularity("hour")?,
        )
        .await?;
        usage::csv(&series, &utilization);
        week_csv.push(clock.elapsed());
        let clock = Instant::now();
        tree_view(&pool, &runtime, &admin).await?;
        tree_pages.push(clock.elapsed());
    }

    let clock = Instant::now();
    let retention = Retention::default();
    let pruned = retention::prune_all(&pool, &retention, now).await?;
    let retention_s = clock.elapsed().as_secs_f64();
    let size_after = database_mb(&pool, &url).await?;
    println!(
        "retention ({} days of output, {} of events): {} outputs cleared, {} events deleted in \
         {retention_s:.1} s",
        retention.output_days, retention.event_days, pruned.outputs, pruned.events
    );
    let review_times = super::measure::Summary::of(reviews);
    let report = HistoryReport {
        database: engine,
        days: ((end - start) / DAY) as u32,
        gpus,
        workloads,
        runs,
        events,
        usage_cells: cells,
        generate_s,
        rollup_s,
        db_mb_before_retention: size_before,
        db_mb_per_month: size_before / ((end - start) as f64 / DAY as f64 / 30.4),
        retention_s,
        outputs_cleared: pruned.outputs,
        events_deleted: pruned.events,
        db_mb_after_retention: size_after,
        review_p50_ms: review_times.p50_ms,
        review_max_ms: review_times.max_ms,
        usage_csv_year_p50_ms: super::measure::Summary::of(year_csv).p50_ms,
        usage_csv_week_hourly_p50_ms: super::measure::Summary::of(week_csv).p50_ms,
        tree_page_p50_ms: super::measure::Summary::of(tree_pages).p50_ms,
        activity_quarter_p50_ms: super::measure::Summary::of(activity).p50_ms,
    };
    println!(
        "{}",
        serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    );
    Ok(())
}

/// The calendar quarter holding `t`.
fn quarter_of(t: i64) -> (i64, i64) {
    let (year, q) = app::calendar::quarter_of(t);
    app::calendar::quarter(year, q).unwrap_or((t, t + 90 * DAY))
}

/// The database's size in MB: SQLite's pages in use, PostgreSQL's `pg_database_size`.
async fn database_mb(pool: &AnyPool, url: &str) -> Result<f64, ServerError> {
    let bytes: i64 = if url.starts_with("postgres") {
        sqlx::query_scalar("select pg_database_size(current_database())")
            .fetch_one(pool)
            .await?
    } else {
        let pages: i64 = sqlx::query_scalar(
            "select page_count - freelist_count from pragma_page_count(), pragma_freelist_count()",
        )
        .fetch_one(pool)
        .await?;
        let size: i64 = sqlx::query_scalar("select page_size from pragma_page_size()")
            .fetch_one(pool)
            .await?;
        pages * size
    };
    Ok(bytes as f64 / 1e6)
}

/// The rows' database ids: each team's leaf and person, the nodes.
struct Ids {
    leaves: Vec<i64>,
    users: Vec<i64>,
    nodes: Vec<i64>,
    /// Each team's share of the cluster.
    fractions: Vec<f64>,
}

impl Ids {
    async fn read(db: &mut AnyConnection, teams: &[seed::Team]) -> Result<Ids, ServerError> {
        let leaves: HashMap<String, i64> =
            sqlx::query_as::<_, (String, i64)>("select path, budget_node_id from budget_node")
                .fetch_all(&mut *db)
                .await?
                .into_iter()
                .collect();
        let users: HashMap<String, i64> =
            sqlx::query_as::<_, (String, i64)>("select username, user_id from \"user\"")
                .fetch_all(&mut *db)
                .await?
                .into_iter()
                .collect();
        let nodes = sqlx::query_scalar("select node_id from node order by node_id")
            .fetch_all(&mut *db)
            .await?;
        let missing = |what: &str| ServerError::Config(format!("{what} was not created"));
        Ok(Ids {
            leaves: teams
                .iter()
                .map(|t| {
                    leaves
                        .get(&t.project)
                        .copied()
                        .ok_or_else(|| missing(&t.project))
                })
                .collect::<Result<_, _>>()?,
            users: teams
                .iter()
                .map(|t| {
                    users
                        .get(&t.person)
                        .copied()
                        .ok_or_else(|| missing(&t.person))
                })
                .collect::<Result<_, _>>()?,
            nodes,
            fractions: teams.iter().map(|t| t.fraction).collect(),
        })
    }
}

/// Between `lo` and `hi` (inclusive).
fn between(dice: &mut Dice, lo: i64, hi: i64) -> i64 {
    lo + dice.roll((hi - lo + 1) as u64) as i64
}

fn generate(args: &HistoryArgs, teams: &[seed::Team], start: i64, end: i64) -> Generated {
    let gpus = f64::from(args.nodes * args.gpus_per_node);
    let per_day = f64::from(args.workloads_per_day) * gpus / 1024.0;
    let hours = ((end - start) / HOUR) as usize;
    let mut dice = Dice::new(0x9e37_79b9_7f4a_7c15);
    let mut out = Generated {
        workloads: Vec::new(),
        runs: Vec::new(),
        events: Vec::new(),
        usage: vec![[0.0; 3]; teams.len() * hours],
    };
    // Teams drawn in proportion to their share.
    let mut cumulative = Vec::with_capacity(teams.len());
    let mut total = 0.0;
    for team in teams {
        total += team.fraction;
        cumulative.push(total);
    }
    let nodes = i64::from(args.nodes);
    let mut id = 0i64;
    let mut carry = 0.0;
    for hour in 0..hours as i64 {
        carry += per_day / 24.0;
        let arrivals = carry.floor() as i64;
        carry -= arrivals as f64;
        for _ in 0..arrivals {
            let submitted_at = start + hour * HOUR + between(&mut dice, 0, HOUR - 1);
            let pick = dice.roll(1_000_000) as f64 / 1e6 * total;
            let team = cumulative
                .partition_point(|c| *c < pick)
                .min(teams.len() - 1);
            let roll = dice.roll(100);
            let class = match roll {
                0..=67 => Class::Debug,
                68..=74 => Class::Training,
                _ => Class::Sweep,
            };
            let (gpus, min_runtime_s, duration, wait) = match class {
                Class::Debug => (
                    [1, 1, 1, 1, 2, 2, 4, 8][dice.roll(8) as usize],
                    between(&mut dice, 5, 15) * 60,
                    between(&mut dice, 120, 900),
                    match dice.roll(100) {
                        0..=79 => between(&mut dice, 0, 30),
                        80..=94 => between(&mut dice, 30, 300),
                        _ => between(&mut dice, 300, 3_600),
                    },
                ),
                Class::Training => (
                    [8, 8, 16, 16, 32, 64][dice.roll(6) as usize] * i64::from(args.gpus_per_node)
                        / 8,
                    1_800,
                    between(&mut dice, HOUR, 12 * HOUR),
                    between(&mut dice, 600, 8 * HOUR),
                ),
                Class::Sweep => (
                    1 + dice.roll(2) as i64,
                    0,
                    between(&mut dice, 3 * HOUR, 16 * HOUR),
                    between(&mut dice, 60, 6 * HOUR),
                ),
            };
            let gpus = gpus.max(1);
            // Training and sweeps are sometimes preempted once and come back later.
            let preempted = match class {
                Class::Debug => false,
                Class::Training => dice.roll(100) < 15,
                Class::Sweep => dice.roll(100) < 25,
            };
            let first_start = submitted_at + wait;
            let mut spans = Vec::new();
            if preempted {
                let first = between(&mut dice, min_runtime_s.max(300), duration.max(600));
                let requeue = between(&mut dice, 300, 4 * HOUR);
                spans.push((first_start, first_start + first, true));
                let second = first_start + first + requeue;
                spans.push((second, second + (duration - first).max(60), false));
            } else {
                spans.push((first_start, first_start + duration, false));
            }
            let ended_at = spans.last().map(|s| s.1).unwrap_or(first_start);
            if ended_at >= end {
                continue;
            }
            id += 1;
            let (state, exit_code, last_kind) = match dice.roll(100) {
                0..=89 => ("succeeded", Some(0), "completed"),
                90..=96 => ("failed", Some(1), "failed"),
                _ => ("cancelled", None, "cancelled"),
            };
            let allocated = class != Class::Sweep;
            let hosts = (gpus + i64::from(args.gpus_per_node) - 1) / i64::from(args.gpus_per_node);
            let node = between(&mut dice, 1, nodes);
            let person = teams[team].person.clone();
            out.events.push((
                id,
                submitted_at,
                "submitted",
                None,
                Event::Submitted { by: person }.detail_json(),
            ));
            let mut queued_since = submitted_at;
            for (i, &(from, to, stopped)) in spans.iter().enumerate() {
                book(
                    &mut out.usage,
                    hours,
                    team,
                    2,
                    start,
                    queued_since,
                    from,
                    gpus,
                    allocated,
                );
                let placement: Vec<GpuPlacement> = (0..hosts)
                    .map(|h| GpuPlacement {
                        node: format!("node{:04}", (node - 1 + h) % nodes),
                        gpus: (0..gpus.min(i64::from(args.gpus_per_node)) as u32).collect(),
                    })
                    .collect();
                let protected_until = (min_runtime_s > 0).then_some(from + min_runtime_s);
                out.events.push((
                    id,
                    from,
                    "started",
                    None,
                    Event::Started {
                        placement,
                        protected_until,
                        resumed: i > 0,
                        wait_s: from - queued_since,
                    }
                    .detail_json(),
                ));
                for h in 0..hosts {
                    let per_host = gpus.min(i64::from(args.gpus_per_node));
                    out.runs.push(RunRow {
                        workload_id: id,
                        node_id: (node - 1 + h) % nodes + 1,
                        gpus: per_host,
                        allocated,
                        started_at: from,
                        protected_until,
                        ended_at: to,
                        end_kind: if stopped { "preempted" } else { last_kind },
                    });
                }
                book(
                    &mut out.usage,
                    hours,
                    team,
                    if allocated { 0 } else { 1 },
                    start,
                    from,
                    to,
                    gpus,
                    true,
                );
                if allocated {
                    book(&mut out.usage, hours, team, 2, start, from, to, gpus, true);
                }
                if stopped {
                    let party = |workload_id: i64, leaf: &str| Party {
                        workload_id,
                        name: None,
                        leaf: leaf.to_string(),
                        ratio: Some(0.9),
                        priority: 0,
                    };
                    let other = &teams[(team + 1) % teams.len()].project;
                    out.events.push((
                        id,
                        to,
                        "preempted",
                        None,
                        Event::Preempted(Preemption {
                            rule: if allocated {
                                PreemptRule::FairShare
                            } else {
                                PreemptRule::FreeWork
                            },
                            at: to,
                            preemptor: party(id + 1, other),
                            victim: party(id, &teams[team].project),
                            split: None,
                            victim_started_at: Some(from),
                            victim_min_runtime_s: min_runtime_s,
                            victim_protected_until: protected_until,
                            then: AfterStop::Requeued,
                        })
                        .detail_json(),
                    ));
                    queued_since = to;
                }
            }
            let done = match state {
                "succeeded" => Event::Succeeded {
                    exit_code: Some(0),
                    note: None,
                },
                "failed" => Event::Failed {
                    exit_code: Some(1),
                    note: None,
                },
                _ => Event::Cancelled {
                    by: teams[team].person.clone(),
                },
            };
            out.events
                .push((id, ended_at, done.kind(), None, done.detail_json()));
            let output = f64::from(args.output_bytes)
                * match class {
                    Class::Debug => 0.5,
                    Class::Training => 4.0,
                    Class::Sweep => 1.0,
                };
            out.workloads.push(WorkloadRow {
                id,
                team,
                class,
                gpus,
                min_runtime_s,
                submitted_at,
                first_started_at: first_start,
                started_at: spans.last().map(|s| s.0).unwrap_or(first_start),
                ended_at,
                state,
                exit_code,
                run_count: spans.len() as i64,
                progress_s: duration,
                output: output as usize,
            });
        }
    }
    out
}

/// Adds `gpus` over `[from, to)` to column `column` of `team`'s hourly cells.
#[allow(clippy::too_many_arguments)]
fn book(
    usage: &mut [[f64; 3]],
    hours: usize,
    team: usize,
    column: usize,
    start: i64,
    from: i64,
    to: i64,
    gpus: i64,
    counts: bool,
) {
    if !counts {
        return;
    }
    let mut t = from.max(start);
    while t < to {
        let hour = (t - start) / HOUR;
        let edge = (start + (hour + 1) * HOUR).min(to);
        if (hour as usize) < hours {
            usage[team * hours + hour as usize][column] += (gpus * (edge - t)) as f64;
        }
        t = edge;
    }
}

async fn write(
    db: &mut AnyConnection,
    args: &HistoryArgs,
    g: &Generated,
    ids: &Ids,
    start: i64,
    end: i64,
) -> Result<(), ServerError> {
    const LINE: &str = "step 000000  loss 1.234567  lr 3.0e-4  tokens/s 123456  gpu-mem 71.2 GiB\n";
    let output = |bytes: usize| LINE.repeat(bytes.div_ceil(LINE.len()));
    let command = |class: Class| match class {
        Class::Debug => "python train.py --config configs/debug.yaml --steps 200",
        Class::Training => "torchrun --nnodes 4 train.py --config configs/pretrain.yaml --resume",
        Class::Sweep => "python sweep.py --trial-from-env --epochs 40",
    };
    insert(
        db,
        "workload",
        WORKLOAD_COLUMNS,
        g.workloads.iter().map(|w| {
            vec![
                Value::Int(w.id),
                Value::Int(ids.users[w.team]),
                Value::Int(ids.leaves[w.team]),
                Value::Text(format!("job-{}", w.id)),
                Value::Text(command(w.class).to_string()),
                Value::Int(w.gpus),
                Value::Int(w.min_runtime_s),
                Value::Int(i64::from(w.class == Class::Training)),
                Value::Int(i64::from(w.class == Class::Debug)),
                Value::Text(w.state.to_string()),
                Value::Int(w.submitted_at),
                Value::Int(w.submitted_at),
                Value::Int(w.first_started_at),
                Value::Int(w.started_at),
                Value::MaybeInt((w.min_runtime_s > 0).then_some(w.started_at + w.min_runtime_s)),
                Value::Int(w.ended_at),
                Value::MaybeInt(w.exit_code),
                Value::Int(w.run_count),
                Value::Int(w.progress_s),
                Value::Text(output(w.output)),
                Value::Int(crate::clusters::DEFAULT_ID),
            ]
        }),
    )
    .await?;
    println!("  workloads written");
    insert(
        db,
        "workload_run",
        RUN_COLUMNS,
        g.runs.iter().map(|r| {
            // As the runtime writes them (`runtime::snapshot::format_indices`).
            let indices: Vec<String> = (0..r.gpus).map(|i| i.to_string()).collect();
            vec![
                Value::Int(r.workload_id),
                Value::Int(ids.nodes[(r.node_id - 1) as usize]),
                Value::Text(indices.join(";")),
                Value::Int(r.gpus),
                Value::Int(i64::from(r.allocated)),
                Value::Int(r.started_at),
                Value::MaybeInt(r.protected_until),
                Value::Int(r.ended_at),
                Value::Int(r.ended_at),
                Value::Text(r.end_kind.to_string()),
                Value::Int(r.ended_at),
            ]
        }),
    )
    .await?;
    println!("  runs written");
    insert(
        db,
        "workload_event",
        &["workload_id", "at", "kind", "node_id", "detail"],
        g.events.iter().map(|(id, at, kind, node, detail)| {
            vec![
                Value::Int(*id),
                Value::Int(*at),
                Value::Text(kind.to_string()),
                Value::MaybeInt(*node),
                Value::Text(detail.clone()),
            ]
        }),
    )
    .await?;
    println!("  events written");
    let hours = ((end - start) / HOUR) as usize;
    let capacity = f64::from(args.nodes * args.gpus_per_node) * HOUR as f64;
    insert(
        db,
        "usage_hour",
        USAGE_COLUMNS,
        g.usage.iter().enumerate().filter_map(|(i, cell)| {
            if cell.iter().all(|v| *v == 0.0) {
                return None;
            }
            let (team, hour) = (i / hours, i % hours);
            let owed = cell[2].min(ids.fractions[team] * capacity);
            Some(vec![
                Value::Int(ids.leaves[team]),
                Value::Int(start + hour as i64 * HOUR),
                Value::Real(cell[0]),
                Value::Real(cell[1]),
                Value::Real(cell[2]),
                Value::Real(owed),
            ])
        }),
    )
    .await?;
    insert(
        db,
        "capacity_hour",
        &["hour", "healthy_gpu_s"],
        (0..hours).map(|h| vec![Value::Int(start + h as i64 * HOUR), Value::Real(capacity)]),
    )
    .await?;
    for cursor in ["demand", "capacity"] {
        crate::runtime::repo::set_ledger_cursor(&mut *db, cursor, end).await?;
    }
    crate::bulk_insert::resync_ids(
        db,
        &[
            ("workload", "workload_id"),
            ("workload_run", "workload_run_id"),
            ("workload_event", "workload_event_id"),
        ],
    )
    .await?;
    Ok(())
}
