//! Bench: the quarterly review over 150 leaves with 90 days of hourly ledger history on SQLite
//! (issue target: under 200 ms server time). Release build: `cargo bench -p server --bench report`.
//! `HOURGLASS_BENCH_DATABASE_URL` (an empty database, e.g. `postgres://…`) measures another one.

use server::{
    budget::{import::import_org, org_file::OrgFile},
    db,
    reports::{calendar, review},
};
use std::{fmt::Write, time::Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = std::env::var("HOURGLASS_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let pool = db::open(&url).await.expect("database");

    // 4 levels: 3 programs × 5 groups × 10 projects = 150 leaves.
    let mut org = String::from("[shares]\n");
    let mut leaves = Vec::new();
    for p in 0..3 {
        let _ = writeln!(org, "\"p{p}\" = {}", 1 + p);
        for g in 0..5 {
            let _ = writeln!(org, "\"p{p}/g{g}\" = {}", 1 + g % 3);
            for l in 0..10 {
                let path = format!("p{p}/g{g}/l{l}");
                let _ = writeln!(org, "\"{path}\" = {}", 1 + l % 4);
                leaves.push(path);
            }
        }
    }
    let (from, to) = calendar::quarter(2026, 3).expect("quarter");
    import_org(&pool, &OrgFile::parse(&org).expect("org"), from)
        .await
        .expect("import");
    let ids: Vec<i64> =
        sqlx::query_scalar("select budget_node_id from budget_node where path like 'p%/g%/l%'")
            .fetch_all(&pool)
            .await
            .expect("leaves");
    assert_eq!(ids.len(), 150);

    let hours = 90 * 24;
    let seeding = Instant::now();
    let mut tx = pool.begin().await.expect("tx");
    for h in 0..hours {
        let hour = from + h * 3600;
        sqlx::query("insert into capacity_hour (hour, healthy_gpu_s) values ($1, $2)")
            .bind(hour)
            .bind(1024.0 * 3600.0)
            .execute(&mut *tx)
            .await
            .expect("capacity");
        for (i, id) in ids.iter().enumerate() {
            let x = ((h as usize * 31 + i * 17) % 97) as f64;
            sqlx::query(
                "insert into usage_hour (budget_node_id, hour, charged_gpu_s, unallocated_gpu_s, demand_gpu_s, owed_gpu_s)
                 values ($1, $2, $3, $4, $5, $6)",
            )
            .bind(id)
            .bind(hour)
            .bind(x * 40.0)
            .bind(x * 5.0)
            .bind(x * 60.0)
            .bind(x * 35.0)
            .execute(&mut *tx)
            .await
            .expect("usage");
        }
    }
    tx.commit().await.expect("commit");
    println!(
        "seeded {} leaf-hours in {:.1} s",
        hours as usize * ids.len(),
        seeding.elapsed().as_secs_f64()
    );

    // The first read rolls up the 90 finished days; later reads sum the rollups (a running server
    // has rolled up every past day long before anyone asks).
    let first = Instant::now();
    review::review(
        &pool,
        from,
        to,
        "Q3 2026".into(),
        server::clock::Clock::system().now(),
    )
    .await
    .expect("review");
    println!(
        "first read, rolling up 90 days: {:.1} ms",
        first.elapsed().as_secs_f64() * 1000.0
    );

    let runs = 9;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let review = review::review(
            &pool,
            from,
            to,
            "Q3 2026".into(),
            server::clock::Clock::system().now(),
        )
        .await
        .expect("review");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(review.rows.iter().filter(|r| r.leaf).count(), 150);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "quarterly review, 150 leaves, 90 days hourly: median {:.1} ms (min {:.1}, max {:.1}) over {runs} runs",
        times[runs / 2],
        times[0],
        times[runs - 1]
    );
}
