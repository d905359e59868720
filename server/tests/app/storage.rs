//! The storage layer on either engine: write transactions run one at a time.

use crate::support::TestApp;
use server::db;

/// Read-then-write transactions from many tasks at once: none may lose another's update (on
/// PostgreSQL this needs `begin_write`'s advisory lock; READ COMMITTED alone would lose some).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn write_transactions_run_one_at_a_time() {
    let app = TestApp::new().await;
    sqlx::query("insert into ledger_cursor (name, through) values ('counter', 0)")
        .execute(&app.pool)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let pool = app.pool.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    let mut tx = db::begin_write(&pool).await.unwrap();
                    let through: i64 = sqlx::query_scalar(
                        "select through from ledger_cursor where name = 'counter'",
                    )
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
                    tokio::task::yield_now().await;
                    sqlx::query("update ledger_cursor set through = $1 where name = 'counter'")
                        .bind(through + 1)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    tx.commit().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let through: i64 =
        sqlx::query_scalar("select through from ledger_cursor where name = 'counter'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(through, 80);
}
