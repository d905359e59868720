//! The activity chart's hourly rollup against the run history it summarises: whatever the history
//! (requeues, gangs, cancels while queued, work still waiting), the rolled-up hours read the same
//! as hours worked out from the workloads and runs, also after the rollup carried waiting work
//! across days and that work later started or was cancelled.

use crate::{live::ORG, support::TestApp};
use scheduler::{DAY, HOUR};
use server::budget::{import::import_org, org_file::OrgFile};
use server::reports::{activity, activity_rollup};

/// A small deterministic generator (the history must be the same on every run).
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as i64
    }
}

async fn insert_workload(
    app: &TestApp,
    gpus: i64,
    min_runtime: i64,
    state: &str,
    submitted: i64,
    first_started: Option<i64>,
    ended: Option<i64>,
) -> i64 {
    sqlx::query_scalar(
        "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s, resumable, state,
                               submitted_at, queued_at, first_started_at, started_at, ended_at, run_count)
         select 1, budget_node_id, 'w', 'true', $1, $2, 1, $3, $4, $4, $5, $5, $6, 0
         from budget_node where path = 'ai/olmo'
         returning workload_id",
    )
    .bind(gpus)
    .bind(min_runtime)
    .bind(state)
    .bind(submitted)
    .bind(first_started)
    .bind(ended)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

async fn insert_run(app: &TestApp, workload: i64, node: i64, start: i64, end: Option<i64>) {
    sqlx::query(
        "insert into workload_run (workload_id, node_id, gpu_indices, gpus, allocated, started_at, charged_through, ended_at, end_kind)
         values ($1, $2, '0', 1, 1, $3, $3, $4, $5)",
    )
    .bind(workload)
    .bind(node)
    .bind(start)
    .bind(end)
    .bind(end.map(|_| "preempted"))
    .execute(&app.pool)
    .await
    .unwrap();
}

async fn insert_stop(app: &TestApp, workload: i64, at: i64, rule: &str) {
    sqlx::query("insert into workload_event (workload_id, at, kind, detail) values ($1, $2, 'preempted', $3)")
        .bind(workload)
        .bind(at)
        .bind(format!("{{\"rule\":\"{rule}\"}}"))
        .execute(&app.pool)
        .await
        .unwrap();
}

/// An app with the test organisation imported (its owners' accounts made first).
async fn organisation() -> TestApp {
    let app = TestApp::new().await;
    for name in ["root", "pat", "ada", "bob"] {
        app.create_user(name, "researcher", "long enough 1").await;
    }
    import_org(&app.pool, &OrgFile::parse(ORG).unwrap(), 0)
        .await
        .unwrap();
    app
}

/// Rolled-up hours (plus the tail worked out on read) against hours worked out from the history
/// alone, over every hour from `from` to `now`.
async fn assert_rollup_matches_history(app: &TestApp, from: i64, now: i64) {
    let upto = activity_rollup::ensure(&app.pool, now).await.unwrap();
    assert!(
        upto.is_some_and(
            |u| u <= now - activity_rollup::LAG && u > now - activity_rollup::LAG - HOUR
        ),
        "rolled up to {upto:?} at {now}"
    );
    let mut db = app.pool.acquire().await.unwrap();
    let rolled = activity::hours_between(&mut db, from, now, now, upto)
        .await
        .unwrap();
    let history = activity::from_history(&mut db, from, now, now)
        .await
        .unwrap();
    assert!(!history.is_empty());
    for (hour, cell) in &history {
        assert_eq!(
            rolled.get(hour),
            Some(cell),
            "hour {} after {from}",
            (hour - from) / HOUR
        );
    }
    assert_eq!(rolled.len(), history.len());
}

#[tokio::test]
async fn rolled_up_activity_reads_the_same_hours_as_the_run_history() {
    let app = organisation().await;
    for (i, name) in ["h-0", "h-1"].iter().enumerate() {
        sqlx::query(
            "insert into node (name, gpu_count, token_hash, registered_at) values ($1, 8, $2, 0)",
        )
        .bind(name)
        .bind(format!("hash-{i}"))
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let start = 1_780_000_000 / DAY * DAY;
    let now = start + 5 * DAY + 1_234;
    let mut dice = Dice(7);
    // Requeued work still queued or cancelled later; (workload, its last run's end).
    let mut waiting_at_now = Vec::new();
    for _ in 0..150 {
        let submitted = start + dice.below(4 * DAY);
        let gpus = [1, 2, 8, 16][dice.below(4) as usize];
        let min_runtime = [0, 300, 900, 3_600][dice.below(4) as usize];
        // Up to three runs separated by waits; a gang's runs start and end together.
        let mut t = submitted + dice.below(20 * HOUR);
        let mut runs = Vec::new();
        for _ in 0..1 + dice.below(3) {
            let end = t + 60 + dice.below(6 * HOUR);
            runs.push((t, end));
            t = end + dice.below(10 * HOUR);
        }
        let kind = dice.below(6);
        let first = runs[0].0;
        let last_end = runs.last().unwrap().1;
        let (state, first_started, ended, open) = match kind {
            // Finished after its runs.
            0 | 1 => ("succeeded", Some(first), Some(last_end), false),
            // Never started: still waiting, or cancelled while queued.
            2 => ("queued", None, None, false),
            3 => (
                "cancelled",
                None,
                Some(submitted + dice.below(DAY) + 1),
                false,
            ),
            // Requeued and waiting since its last run.
            4 => ("queued", Some(first), None, false),
            // Running its last run.
            _ => ("running", Some(first), None, true),
        };
        if first_started.is_some_and(|f| f >= now) || last_end >= now {
            continue;
        }
        let id = insert_workload(
            &app,
            gpus,
            min_runtime,
            state,
            submitted,
            first_started,
            ended,
        )
        .await;
        if first_started.is_some() {
            for (k, &(s, e)) in runs.iter().enumerate() {
                let end = (!(open && k + 1 == runs.len())).then_some(e);
                insert_run(&app, id, 1, s, end).await;
                if gpus > 8 {
                    insert_run(&app, id, 2, s, end).await;
                }
                if let Some(e) = end.filter(|_| k + 1 < runs.len() || state == "queued") {
                    insert_stop(&app, id, e, ["fair-share", "fast-lane"][k % 2]).await;
                }
            }
            if state == "queued" {
                waiting_at_now.push((id, last_end));
            }
        }
    }
    assert!(
        waiting_at_now.len() > 3,
        "the history has requeued work waiting"
    );
    assert_rollup_matches_history(&app, start, now).await;

    // A day later: half the requeued work started again, the rest was cancelled while queued;
    // the rollup carried them across days as waiting.
    let later = now + DAY;
    for (k, &(id, last_end)) in waiting_at_now.iter().enumerate() {
        let at = now + 3 * HOUR + (k as i64) * 60;
        assert!(at > last_end);
        if k % 2 == 0 {
            sqlx::query(
                "update workload set state = 'running', started_at = $2 where workload_id = $1",
            )
            .bind(id)
            .bind(at)
            .execute(&app.pool)
            .await
            .unwrap();
            insert_run(&app, id, 1, at, None).await;
        } else {
            sqlx::query(
                "update workload set state = 'cancelled', ended_at = $2 where workload_id = $1",
            )
            .bind(id)
            .bind(at)
            .execute(&app.pool)
            .await
            .unwrap();
        }
    }
    assert_rollup_matches_history(&app, start, later).await;
}

/// Today's waits come from hours rolled up as the day goes and the last hour's first starts: the
/// same waits whether the hours were rolled up already or not, and the same again once they are.
#[tokio::test]
async fn todays_waits_read_the_same_from_rolled_up_hours_as_from_the_workloads() {
    let app = organisation().await;
    let today = 1_780_000_000 / DAY * DAY;
    let now = today + 5 * HOUR + 1_800;
    // First starts yesterday, in today's first hours, and in the last half hour; one never
    // started; one submitted before the period.
    let mut expected = Vec::new();
    for (k, (submitted, first)) in [
        (today - 2 * HOUR, Some(today - HOUR)),
        (today + 100, Some(today + 700)),
        (today + HOUR, Some(today + 3 * HOUR + 5)),
        (today + 4 * HOUR, Some(today + 5 * HOUR - 1)),
        (today + 5 * HOUR, Some(today + 5 * HOUR + 900)),
        (today + 5 * HOUR + 60, None),
        (today - 3 * DAY, Some(today + 2 * HOUR)),
    ]
    .into_iter()
    .enumerate()
    {
        let state = if first.is_some() {
            "succeeded"
        } else {
            "queued"
        };
        insert_workload(&app, 1 + k as i64, 300, state, submitted, first, first).await;
        if submitted >= today - DAY {
            expected.push((submitted, first.unwrap_or(now) - submitted));
        }
    }
    expected.sort_unstable();
    let mut db = app.pool.acquire().await.unwrap();
    assert_eq!(waits(&mut db, today, now).await, expected);
    let rolled: i64 = sqlx::query_scalar("select count(*) from wait_rollup_hour")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(rolled, 5, "hours 0 to 4 of today are rolled up");
    assert_eq!(waits(&mut db, today, now).await, expected);
}

/// `(submitted, wait)` of the workloads submitted yesterday or today, as the review reads them.
async fn waits(db: &mut sqlx::AnyConnection, today: i64, now: i64) -> Vec<(i64, i64)> {
    let mut got: Vec<(i64, i64)> =
        server::reports::waits::submitted_between(db, today - DAY, today + DAY, now)
            .await
            .unwrap()
            .into_iter()
            .map(|w| (w.submitted_at, w.wait_s))
            .collect();
    got.sort_unstable();
    got
}
