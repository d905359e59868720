//! Retention: finished workloads lose their output, then their events (preemptions and drains
//! stay), after the days the settings give; workloads still running or recently ended keep both.

use crate::support::{now, seed_org, TestApp, TestDb};
use app::workloads::reasons::{AfterStop, Event, Party, PreemptRule, Preemption};
use axum::http::StatusCode;
use server::workloads::{
    repo as workloads,
    retention::{prune_all, prune_step, Retention},
};
use sqlx::AnyPool;

const DAY: i64 = 86_400;

/// A workload of ada's that ran and ended `ended_days_ago` (`None`: still queued), with output
/// and a submitted, a preempted and a final event.
async fn finished(pool: &AnyPool, name: &str, ended_days_ago: Option<i64>) -> i64 {
    let t = now();
    let ada = server::users::repo::find_user_by_username(pool, "ada")
        .await
        .unwrap()
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    let leaf = server::budget::repo::find_node_by_path(&mut tx, "ai/olmo")
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    let submitted = t - ended_days_ago.unwrap_or(0) * DAY - 7_200;
    let id = workloads::insert_workload(
        pool,
        ada.user_id,
        leaf,
        name,
        "true",
        1,
        900,
        true,
        0,
        1,
        submitted,
    )
    .await
    .unwrap();
    workloads::set_log_tail(pool, id, "epoch 1 loss 0.5\n")
        .await
        .unwrap();
    let party = |workload_id| Party {
        workload_id,
        name: None,
        leaf: "ai/olmo".into(),
        ratio: Some(1.0),
        priority: 0,
    };
    let events = [
        Event::Submitted { by: "ada".into() },
        Event::Preempted(Preemption {
            rule: PreemptRule::FairShare,
            at: submitted + 600,
            preemptor: party(id + 1000),
            victim: party(id),
            split: None,
            victim_started_at: Some(submitted),
            victim_min_runtime_s: 900,
            victim_protected_until: Some(submitted + 900),
            then: AfterStop::Requeued,
        }),
        Event::Succeeded {
            exit_code: Some(0),
            note: None,
        },
    ];
    for (i, event) in events.iter().enumerate() {
        workloads::insert_event(pool, id, submitted + 600 * i as i64, None, event)
            .await
            .unwrap();
    }
    if let Some(days) = ended_days_ago {
        sqlx::query(
            "update workload set state = 'succeeded', ended_at = $2, exit_code = 0
             where workload_id = $1",
        )
        .bind(id)
        .bind(t - days * DAY)
        .execute(pool)
        .await
        .unwrap();
    }
    id
}

async fn kinds(pool: &AnyPool, id: i64) -> Vec<String> {
    workloads::events(pool, id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event.kind().to_string())
        .collect()
}

#[tokio::test]
async fn old_output_and_events_are_removed_after_their_days_and_preemptions_and_recent_work_stay() {
    let db = TestDb::new().await;
    let pool = server::db::open(&db.url).await.unwrap();
    seed_org(&pool).await;
    let queued = finished(&pool, "still-queued", None).await;
    let recent = finished(&pool, "yesterday", Some(1)).await;
    let month = finished(&pool, "six-weeks-ago", Some(42)).await;
    let old = finished(&pool, "last-year", Some(200)).await;
    let t = now();
    let retention = Retention {
        output_days: 30,
        event_days: 180,
    };

    let pruned = prune_all(&pool, &retention, t).await.unwrap();
    assert_eq!((pruned.outputs, pruned.events), (2, 2), "{pruned:?}");
    assert!(pruned.caught_up);
    for id in [queued, recent] {
        assert_eq!(
            workloads::log_tail(&pool, id).await.unwrap(),
            "epoch 1 loss 0.5\n"
        );
        assert_eq!(
            workloads::removed_at(&pool, id).await.unwrap(),
            (None, None)
        );
        assert_eq!(
            kinds(&pool, id).await,
            ["submitted", "preempted", "succeeded"]
        );
    }
    assert_eq!(workloads::log_tail(&pool, month).await.unwrap(), "");
    assert_eq!(
        workloads::removed_at(&pool, month).await.unwrap(),
        (Some(t), None)
    );
    assert_eq!(
        kinds(&pool, month).await,
        ["submitted", "preempted", "succeeded"]
    );
    assert_eq!(workloads::log_tail(&pool, old).await.unwrap(), "");
    assert_eq!(
        workloads::removed_at(&pool, old).await.unwrap(),
        (Some(t), Some(t))
    );
    assert_eq!(
        kinds(&pool, old).await,
        ["preempted"],
        "the reports count preemptions"
    );

    // Each ended workload is visited once: a second step has nothing to do.
    let again = prune_step(&pool, &retention, t + 60).await.unwrap();
    assert_eq!((again.outputs, again.events, again.caught_up), (0, 0, true));

    // A shorter retention reaches further back from where the last step stopped.
    let shorter = Retention {
        output_days: 30,
        event_days: 30,
    };
    let pruned = prune_all(&pool, &shorter, t + 120).await.unwrap();
    assert_eq!((pruned.outputs, pruned.events), (0, 2));
    assert_eq!(kinds(&pool, month).await, ["preempted"]);
    assert_eq!(
        kinds(&pool, recent).await,
        ["submitted", "preempted", "succeeded"]
    );
}

#[tokio::test]
async fn retention_is_set_in_whole_days_on_the_settings_page_and_left_alone_when_not_sent() {
    let app = TestApp::new().await;
    app.create_user("root", "admin", "long enough 1").await;
    let admin = app.sign_in("root", "long enough 1").await;
    let base = [
        ("window_days", "7"),
        ("max_min_runtime_hours", "8"),
        ("damping_margin", "0.02"),
        ("heartbeat_deadline_s", "30"),
        ("grace_s", "10"),
    ];
    let with = |output: &'static str, events: &'static str| {
        let mut form = base.to_vec();
        form.push(("output_retention_days", output));
        form.push(("event_retention_days", events));
        form
    };
    for (output, events, field, message) in [
        ("0", "180", "output_retention_days", "between 1 and 3650"),
        ("30", "1.5", "event_retention_days", "whole number of days"),
        (
            "thirty",
            "180",
            "output_retention_days",
            "not \\\"thirty\\\"",
        ),
    ] {
        let refused = app
            .post_form("/api/settings/update", &with(output, events), Some(&admin))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refused.body
        );
        assert!(refused.body.contains(field), "{}", refused.body);
        assert!(refused.body.contains(message), "{}", refused.body);
        assert_eq!(app.runtime.config().retention, Retention::default());
    }

    let saved = app
        .post_form("/api/settings/update", &with("14", "90"), Some(&admin))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    let expected = Retention {
        output_days: 14,
        event_days: 90,
    };
    assert_eq!(app.runtime.config().retention, expected);
    let audited: Vec<String> = sqlx::query_scalar("select key from setting_change order by key")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(audited, ["event_retention_days", "output_retention_days"]);
    let reloaded = server::settings::load(&app.pool, Default::default())
        .await
        .unwrap();
    assert_eq!(
        reloaded.retention, expected,
        "stored: kept across a restart"
    );

    // A client that does not know the fields leaves them as they are.
    let kept = app
        .post_form("/api/settings/update", &base, Some(&admin))
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);
    assert_eq!(app.runtime.config().retention, expected);
}
