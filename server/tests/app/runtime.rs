//! The live system end to end: server + runtime + real agent processes on loopback.

use crate::live::{job, Live};
use reqwest::StatusCode;
use serde_json::json;
use server::runtime::config::RuntimeConfig;

#[tokio::test]
async fn a_workload_runs_and_succeeds_with_its_gpus_in_cuda_visible_devices() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    let id = live
        .submit(
            "ada",
            job(
                "ai/olmo",
                "probe",
                "echo gpus=$CUDA_VISIBLE_DEVICES id=$HOURGLASS_WORKLOAD_ID",
                2,
                900,
                true,
            ),
        )
        .await;
    let done = live.wait_for_state(id, "succeeded").await;
    assert_eq!(done["exit_code"], 0);
    let log = live
        .http
        .get(format!("{}/api/v1/workloads/{id}/log", live.url))
        .bearer_auth(live.token("ada").await);
    let log = log.send().await.unwrap().text().await.unwrap();
    assert!(log.contains(&format!("gpus=0,1 id={id}")), "{log}");
    let kinds: Vec<&str> = done["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["submitted", "started", "succeeded"]);
}

#[tokio::test]
async fn a_free_workload_is_preempted_by_an_allocated_one_and_the_reason_is_recorded() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    let free = live
        .submit(
            "bob",
            job("ai/molmo", "free-sweep", "sleep 60", 4, 0, false),
        )
        .await;
    live.wait_for_state(free, "running").await;
    let debug = live
        .submit("ada", job("ai/olmo", "debug", "sleep 1", 2, 900, true))
        .await;
    let preempted = live.wait_for_state(free, "preempted").await;
    let event = preempted["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "preempted")
        .unwrap()
        .clone();
    assert_eq!(event["detail"]["rule"], "free-work");
    assert_eq!(event["detail"]["preemptor"]["workload_id"], debug);
    assert_eq!(event["detail"]["preemptor"]["leaf"], "ai/olmo");
    assert_eq!(event["detail"]["victim"]["leaf"], "ai/molmo");
    let done = live.wait_for_state(debug, "succeeded").await;
    let started = done["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "started")
        .unwrap()
        .clone();
    let waited = started["at"].as_i64().unwrap() - done["submitted_at"].as_i64().unwrap();
    assert!(waited <= 1, "a debug workload that can start by preempting free work is assigned within a second: {waited} s");
}

#[tokio::test]
async fn a_killed_agents_node_goes_down_and_its_resumable_workload_finishes_on_another_node() {
    let mut live = Live::start().await;
    let first = live.add_agent("n1", 2).await;
    let id = live
        .submit("ada", job("ai/olmo", "train", "sleep 4", 2, 1, true))
        .await;
    let running = live.wait_for_state(id, "running").await;
    let node = running["placement"][0]["node"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(node, "n1");
    live.add_agent("n2", 2).await;
    live.agents[first].kill_hard().await;
    live.wait_for_node("n1", "down").await;
    let done = live.wait_for_state(id, "succeeded").await;
    let drained = done["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "drained")
        .unwrap()
        .clone();
    assert_eq!(drained["detail"]["rule"], "host-down");
    assert_eq!(drained["detail"]["then"], "requeued");
    let starts: Vec<&str> = done["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "started")
        .map(|e| e["detail"]["placement"][0]["node"].as_str().unwrap())
        .collect();
    assert_eq!(starts, ["n1", "n2"]);
}

#[tokio::test]
async fn cancelling_a_running_workload_stops_it_and_charges_only_until_then() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    let id = live
        .submit("ada", job("ai/olmo", "long", "sleep 60", 1, 900, true))
        .await;
    live.wait_for_state(id, "running").await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, body) = live
        .post("bob", &format!("/api/v1/workloads/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = live
        .post("ada", &format!("/api/v1/workloads/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "cancelled");
    let charged: f64 =
        sqlx::query_scalar("select coalesce(sum(charged_gpu_s), 0.0) from usage_hour")
            .fetch_one(&live.app.pool)
            .await
            .unwrap();
    let run: (i64, i64) =
        sqlx::query_as("select started_at, ended_at from workload_run where workload_id = $1")
            .bind(id)
            .fetch_one(&live.app.pool)
            .await
            .unwrap();
    assert!(run.1 - run.0 >= 2, "the run lasted at least 2 s");
    assert_eq!(
        charged,
        (run.1 - run.0) as f64,
        "one GPU charged exactly for the run"
    );
}

#[tokio::test]
async fn the_ledger_books_owed_time_as_the_funded_rate_capped_by_demand() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    // ai/olmo is funded for 3 of the 4 GPUs and asks for all 4.
    let id = live
        .submit("ada", job("ai/olmo", "wide", "sleep 3", 4, 900, true))
        .await;
    let done = live.wait_for_state(id, "succeeded").await;
    // The run's end is charged when the agent reports it; demand up to that end is booked by the
    // next pass (the ledger's demand cursor passing it). Read once it has.
    let ended = done["ended_at"].as_i64().unwrap();
    let waited = std::time::Instant::now();
    while server::runtime::repo::ledger_cursor(&live.app.pool, "demand")
        .await
        .unwrap()
        .is_none_or(|through| through < ended)
    {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "no pass booked demand through the run's end"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let rows: Vec<(f64, f64, f64, f64)> = sqlx::query_as(
        "select u.owed_gpu_s, u.demand_gpu_s, u.charged_gpu_s, c.healthy_gpu_s from usage_hour u
         join budget_node b on b.budget_node_id = u.budget_node_id join capacity_hour c on c.hour = u.hour
         where b.path = 'ai/olmo'",
    )
    .fetch_all(&live.app.pool)
    .await
    .unwrap();
    let demand: f64 = rows.iter().map(|r| r.1).sum();
    let charged: f64 = rows.iter().map(|r| r.2).sum();
    assert!(
        demand >= 4.0 * 3.0,
        "demand booked while it waited and ran: {demand}"
    );
    assert!(
        charged >= 4.0 * 3.0 && charged <= demand,
        "{charged} vs {demand}"
    );
    for (owed, demand, _, capacity) in rows {
        assert_eq!(
            owed,
            (0.75 * capacity).min(demand),
            "owed = min(f · C_h, demand_h)"
        );
    }
}

#[tokio::test]
async fn an_announcement_concerns_only_the_nodes_it_names_so_other_agents_held_syncs_stay_asleep() {
    let app = crate::support::TestApp::new().await;
    let runtime = server::runtime::Runtime::new(app.pool.clone(), Default::default());
    let seen = *runtime.assignments().borrow();
    runtime.announce();
    assert!(!runtime.node_changed_since(1, seen) && !runtime.node_changed_since(2, seen));
    runtime.announce_nodes([1]);
    assert!(runtime.node_changed_since(1, seen));
    assert!(!runtime.node_changed_since(2, seen));
    let later = *runtime.assignments().borrow();
    assert!(later > seen, "pages follow every announcement");
    assert!(!runtime.node_changed_since(1, later));
    runtime.announce_all_nodes();
    assert!(runtime.node_changed_since(1, later) && runtime.node_changed_since(2, later));
}

#[tokio::test]
async fn demand_counts_each_workload_from_its_submission_to_its_end_to_the_second() {
    use server::budget::{import::import_org, org_file::OrgFile};
    let app = crate::support::TestApp::new().await;
    for name in ["root", "pat", "ada", "bob"] {
        app.create_user(name, "researcher", "long enough 1").await;
    }
    let t = 1_000 * scheduler::HOUR;
    import_org(
        &app.pool,
        &OrgFile::parse(crate::live::ORG).unwrap(),
        t - 10,
    )
    .await
    .unwrap();
    let accrue = |at: i64| {
        let pool = app.pool.clone();
        async move {
            let mut tx = server::db::begin_write(&pool).await.unwrap();
            server::runtime::ledger::accrue(&mut tx, at).await.unwrap();
            tx.commit().await.unwrap();
        }
    };
    accrue(t).await;
    // Between two bookings: 4 GPUs submitted at t+100 and still queued, 2 GPUs submitted at
    // t+200 and cancelled at t+500, and free work (not demand).
    for (gpus, min_runtime, state, submitted, ended) in [
        (4, 900, "queued", t + 100, None),
        (2, 900, "cancelled", t + 200, Some(t + 500)),
        (1, 0, "queued", t + 300, None),
    ] {
        sqlx::query(
            "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s, resumable,
                                   priority, state, submitted_at, queued_at, ended_at)
             select u.user_id, b.budget_node_id, 'w', 'true', $1, $2, 1, 0, $3, $4, $4, $5
             from \"user\" u, budget_node b where u.username = 'ada' and b.path = 'ai/olmo'",
        )
        .bind(gpus)
        .bind(min_runtime)
        .bind(state)
        .bind(submitted)
        .bind(ended)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let demand = |hour: i64| {
        let pool = app.pool.clone();
        async move {
            let demand: f64 = sqlx::query_scalar(
                "select coalesce(sum(u.demand_gpu_s), 0.0) from usage_hour u
                 join budget_node b on b.budget_node_id = u.budget_node_id
                 where b.path = 'ai/olmo' and u.hour = $1",
            )
            .bind(hour)
            .fetch_one(&pool)
            .await
            .unwrap();
            demand
        }
    };
    accrue(t + 1_000).await;
    assert_eq!(demand(t).await, 4.0 * 900.0 + 2.0 * 300.0);
    // Across an hour boundary: each hour gets its own part.
    accrue(t + scheduler::HOUR + 100).await;
    assert_eq!(demand(t).await, 4.0 * 3_500.0 + 2.0 * 300.0);
    assert_eq!(demand(t + scheduler::HOUR).await, 4.0 * 100.0);
}

/// Services read the runtime's clock, not the system's: with it fixed a day ahead, a submission,
/// its start, its protection and its cancellation carry exactly the clock's times.
#[tokio::test]
async fn what_the_server_records_is_stamped_with_its_clock() {
    let at = crate::support::now() + 86_400;
    let clock = server::clock::Clock::fixed(at);
    let mut live = Live::start_on(crate::live::fast_config(), clock.clone()).await;
    live.add_agent("n1", 4).await;
    let id = live
        .submit("ada", job("ai/olmo", "stamped", "sleep 60", 1, 900, true))
        .await;
    let running = live.wait_for_state(id, "running").await;
    assert_eq!(running["submitted_at"], at, "{running}");
    assert_eq!(running["first_started_at"], at, "{running}");
    assert_eq!(running["protected_until"], at + 900, "{running}");

    clock.advance(1_000);
    let (status, cancelled) = live
        .post("ada", &format!("/api/v1/workloads/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["ended_at"], at + 1_000, "{cancelled}");
}

#[tokio::test]
async fn pages_say_how_long_work_has_run_by_the_servers_clock() {
    let at = crate::support::now() + 86_400;
    let clock = server::clock::Clock::fixed(at);
    let config = RuntimeConfig {
        heartbeat_deadline: 3_600,
        ..crate::live::fast_config()
    };
    let mut live = Live::start_on(config, clock.clone()).await;
    live.add_agent("n1", 1).await;
    let id = live
        .submit("ada", job("ai/olmo", "steady", "sleep 600", 1, 900, true))
        .await;
    live.wait_for_state(id, "running").await;
    clock.advance(300);
    let cookie = live.app.sign_in("ada", "long enough 1").await;
    let page = live
        .http
        .get(format!("{}/workloads", live.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("steady"), "{page}");
    // Rendered at the server's time, not the machine's (a day earlier).
    assert!(page.contains("running 5 min"), "workload {id}: {page}");
}

/// The engine decides on a snapshot read without the write lock; a workload that changes before
/// the decision is written is left as it now is.
#[tokio::test]
async fn a_decision_read_before_its_workload_was_cancelled_does_not_start_it() {
    use axum::{
        body::Body,
        http::{header, Request},
    };
    use server::{db, runtime::apply};
    let app = crate::support::TestApp::new().await;
    let (node_token, token) = crate::support::seed_org(&app.pool).await;
    connect_n1(&app, &node_token).await;
    let api = |method: &str, path: &str, body: serde_json::Value| {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let submitted = app
        .send(api(
            "POST",
            "/api/v1/workloads",
            job("ai/olmo", "changes-its-mind", "true", 1, 60, true),
        ))
        .await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);
    let id = submitted.json()["id"].as_i64().unwrap();

    let now = crate::support::now();
    let snapshots = load_snapshots(&app, now).await;
    let snapshot = snapshots.cluster(1).expect("the default cluster");
    let decision = snapshot.engine.decide(&snapshot.state(), now).unwrap();
    assert_eq!(decision.actions.len(), 1, "{decision:?}");

    let cancelled = app
        .send(api(
            "POST",
            &format!("/api/v1/workloads/{id}/cancel"),
            json!({}),
        ))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let mut tx = db::begin_write(&app.pool).await.unwrap();
    let applied = apply::apply(&mut tx, snapshot, &decision, now)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!((applied.started, applied.stale), (0, 1));
    let runs: i64 = sqlx::query_scalar("select count(*) from workload_run where workload_id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(runs, 0, "no run was started for a cancelled workload");
    let state: String = sqlx::query_scalar("select state from workload where workload_id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(state, "cancelled");
}

#[tokio::test]
async fn only_the_owner_of_an_ended_workload_may_resubmit_it() {
    let mut live = Live::start().await;
    live.add_agent("n1", 1).await;
    let done = live
        .submit("ada", job("ai/olmo", "done", "echo done", 1, 60, true))
        .await;
    live.wait_for_state(done, "succeeded").await;
    let busy = live
        .submit("ada", job("ai/olmo", "busy", "sleep 60", 1, 60, true))
        .await;
    live.wait_for_state(busy, "running").await;
    let may = |who: &'static str, id: i64| {
        let live = &live;
        async move {
            let (status, detail) = live.get(who, &format!("/api/v1/workloads/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{detail}");
            detail["can_resubmit"].as_bool().expect("can_resubmit")
        }
    };
    assert!(may("ada", done).await, "the owner of an ended workload");
    assert!(!may("bob", done).await, "someone else's");
    assert!(!may("root", done).await, "an admin's is not theirs either");
    assert!(
        !may("ada", busy).await,
        "a running workload is not resubmitted"
    );
}

#[tokio::test]
async fn a_queued_workload_is_given_an_estimated_start_when_the_work_ahead_of_it_should_end() {
    let mut live = Live::start().await;
    live.add_agent("n1", 4).await;
    // Nothing has finished yet, so work is assumed to run an hour (or its minimum runtime).
    let first = live
        .submit("ada", job("ai/olmo", "long", "sleep 120", 4, 900, true))
        .await;
    let running = live.wait_for_state(first, "running").await;
    assert_eq!(running["estimated_start"], serde_json::Value::Null);
    let started = running["started_at"].as_i64().unwrap();
    let second = live
        .submit("ada", job("ai/olmo", "next", "sleep 1", 4, 900, true))
        .await;
    let third = live
        .submit("ada", job("ai/olmo", "after", "sleep 1", 4, 7200, true))
        .await;

    let queued = live.workload(second).await;
    assert_eq!(queued["state"], "queued", "{queued}");
    let estimate = &queued["estimated_start"];
    assert_eq!(estimate["at"], started + 3600, "{estimate}");
    assert!(estimate["as_of"].as_i64().unwrap() >= started, "{estimate}");
    // The third starts after the second's hour, and runs its own two-hour minimum after that.
    let after = live.workload(third).await;
    assert_eq!(
        after["estimated_start"]["at"],
        started + 2 * 3600,
        "{after}"
    );

    // Where projections are slow (a huge queue), a workload submitted since is estimated in the
    // background: its page says nothing yet, then has its estimate.
    live.runtime
        .queue_cache()
        .estimates
        .cost_ms
        .store(250, std::sync::atomic::Ordering::Relaxed);
    let fourth = live
        .submit("ada", job("ai/olmo", "later", "sleep 1", 4, 900, true))
        .await;
    assert_eq!(
        live.workload(fourth).await["estimated_start"],
        serde_json::Value::Null
    );
    let mut estimated = serde_json::Value::Null;
    for _ in 0..100 {
        estimated = live.workload(fourth).await["estimated_start"].clone();
        if !estimated.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Short (debug) work like the second, it goes ahead of the third's two-hour job.
    assert_eq!(
        estimated["at"],
        started + 2 * 3600,
        "after the second's hour"
    );

    // Once it runs, its page no longer estimates a start.
    let (status, _) = live
        .post(
            "ada",
            &format!("/api/v1/workloads/{first}/cancel"),
            json!({}),
        )
        .await;
    assert!(status.is_success(), "{status}");
    let now_running = live.wait_for_state(second, "running").await;
    assert_eq!(now_running["estimated_start"], serde_json::Value::Null);
}

/// At 50,000 queued a first projection takes seconds of a core, and the crowd that looked first
/// waited for it: the server keeps one ready without a look, and computes none while its queue
/// stays as it is.
#[tokio::test]
async fn start_estimates_are_kept_ready_without_a_look_and_not_recomputed_for_an_unchanged_queue() {
    let at = crate::support::now() + 86_400;
    let clock = server::clock::Clock::fixed(at);
    let config = RuntimeConfig {
        heartbeat_deadline: 30 * 86_400,
        ..crate::live::fast_config()
    };
    let mut live = Live::start_on(config, clock.clone()).await;
    live.add_agent("n1", 4).await;
    let first = live
        .submit("ada", job("ai/olmo", "long", "sleep 600", 4, 900, true))
        .await;
    live.wait_for_state(first, "running").await;
    let second = live
        .submit("ada", job("ai/olmo", "next", "sleep 1", 4, 900, true))
        .await;
    // Every look happened before this: what is computed from now on, nobody asked for.
    clock.advance(scheduler::HOUR / 2);
    let now = clock.now();
    server::workloads::estimate::keep_warm(
        live.app.pool.clone(),
        live.runtime.clone(),
        std::time::Duration::from_millis(50),
    );
    let estimates = &live.runtime.queue_cache().estimates;
    let mut kept = None;
    for _ in 0..200 {
        kept = estimates
            .get()
            .filter(|(_, computed_at, _)| *computed_at == now);
        if kept.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, _, projection) = kept.expect("a projection computed without a look");
    assert_eq!(
        projection.start_of(scheduler::WorkloadId(second as u64)),
        scheduler::Estimate::At(at + scheduler::HOUR),
        "the second starts when the first's assumed hour ends"
    );

    // Old, but the queue has not changed: nothing to compute.
    clock.advance(scheduler::HOUR);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, computed_at, _) = estimates.get().unwrap();
    assert_eq!(computed_at, now, "not recomputed for the same queue");
}

#[tokio::test]
async fn a_pass_reads_the_debug_runs_that_ended_within_the_fast_lanes_window() {
    use scheduler::EndedRun;
    let app = crate::support::TestApp::new().await;
    let (node_token, token) = crate::support::seed_org(&app.pool).await;
    connect_n1(&app, &node_token).await;
    let mut ids = Vec::new();
    // Debug work (a minimum runtime of at most 15 minutes), training, free work.
    for (name, min_runtime) in [("debug", 600), ("training", 3600), ("sweep", 0)] {
        let body = job("ai/olmo", name, "true", 2, min_runtime, true);
        let submitted = app.post_json("/api/v1/workloads", &token, &body).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.body);
        ids.push(submitted.json()["id"].as_i64().unwrap());
    }
    let node_id: i64 = sqlx::query_scalar("select node_id from node where name = 'n1'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let now = crate::support::now();
    // (workload, started, ended): the debug workload ran twice, once inside the hour and once
    // before it; training and free work ran inside it.
    let runs = [
        (ids[0], now - 1_500, now - 600),
        (ids[0], now - 9_000, now - 7_200),
        (ids[1], now - 1_500, now - 600),
        (ids[2], now - 1_500, now - 600),
    ];
    for (workload, started, ended) in runs {
        sqlx::query(
            "insert into workload_run (workload_id, node_id, gpu_indices, gpus, allocated,
             started_at, charged_through, ended_at, end_kind)
             values ($1, $2, '0;1', 2, 1, $3, $4, $4, 'completed')",
        )
        .bind(workload)
        .bind(node_id)
        .bind(started)
        .bind(ended)
        .execute(&app.pool)
        .await
        .unwrap();
    }

    let snapshots = load_snapshots(&app, now).await;
    let snapshot = snapshots.cluster(1).expect("the default cluster");
    assert_eq!(
        snapshot.state().ended_debug,
        [EndedRun {
            gpus: 2,
            started_at: now - 1_500,
            ended_at: now - 600,
        }]
    );
}

/// Connects node `n1` (2 GPUs) with its agent's first sync.
/// Demand sums every queued workload: at 50,000 queued, summed at every pass it was most of the
/// pass's write transaction. A pass books it once it is half a minute behind or an hour has ended,
/// still to the second, and books capacity every time.
#[tokio::test]
async fn a_pass_books_capacity_every_time_and_demand_every_half_minute_and_each_hour_to_the_second()
{
    use scheduler::HOUR;
    let app = crate::support::TestApp::new().await;
    let (node_token, _) = crate::support::seed_org(&app.pool).await;
    connect_n1(&app, &node_token).await;
    let t = (crate::support::now() / HOUR + 2) * HOUR;
    let pass = |at: i64| {
        let pool = app.pool.clone();
        async move {
            let mut tx = server::db::begin_write(&pool).await.unwrap();
            server::runtime::ledger::accrue_in_pass(&mut tx, at, 30)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    };
    let booked = |column: &'static str, hour: i64| {
        let pool = app.pool.clone();
        async move {
            let sql = match column {
                "capacity" => {
                    "select coalesce(sum(healthy_gpu_s), 0.0) from capacity_hour where hour = $1"
                }
                _ => "select coalesce(sum(demand_gpu_s), 0.0) from usage_hour where hour = $1",
            };
            let gpu_s: f64 = sqlx::query_scalar(sql)
                .bind(hour)
                .fetch_one(&pool)
                .await
                .unwrap();
            gpu_s
        }
    };
    pass(t).await;
    sqlx::query(
        "insert into workload (user_id, budget_node_id, name, command, gpus, min_runtime_s, resumable,
                               priority, state, submitted_at, queued_at)
         select u.user_id, b.budget_node_id, 'w', 'true', 4, 900, 1, 0, 'queued', $1, $1
         from \"user\" u, budget_node b where u.username = 'ada' and b.path = 'ai/olmo'",
    )
    .bind(t + 5)
    .execute(&app.pool)
    .await
    .unwrap();

    pass(t + 10).await;
    assert_eq!(booked("capacity", t).await, 2.0 * 10.0, "n1's 2 GPUs");
    assert_eq!(booked("demand", t).await, 0.0, "10 s behind: not yet");
    pass(t + 40).await;
    assert_eq!(booked("capacity", t).await, 2.0 * 40.0);
    assert_eq!(
        booked("demand", t).await,
        4.0 * 35.0,
        "from its submission, to the second"
    );
    pass(t + 50).await;
    assert_eq!(booked("demand", t).await, 4.0 * 35.0);
    // An hour ended: booked at once, each hour its part.
    pass(t + HOUR + 5).await;
    assert_eq!(booked("demand", t).await, 4.0 * (HOUR - 5) as f64);
    assert_eq!(booked("demand", t + HOUR).await, 4.0 * 5.0);
    assert_eq!(booked("capacity", t).await, 2.0 * HOUR as f64);
}

async fn connect_n1(app: &crate::support::TestApp, node_token: &str) {
    let body = json!({ "name": "n1", "gpus": 2 });
    let sync = app.post_json("/api/agent/v1/sync", node_token, &body).await;
    assert_eq!(sync.status, StatusCode::OK, "{}", sync.body);
}

/// What a pass at `now` reads, every cluster.
async fn load_snapshots(
    app: &crate::support::TestApp,
    now: i64,
) -> server::runtime::snapshot::Snapshots {
    let mut read = server::db::begin_read(&app.pool).await.unwrap();
    let snapshots = server::runtime::snapshot::load(&mut read, &app.runtime.config(), now)
        .await
        .unwrap()
        .expect("a tree");
    read.rollback().await.unwrap();
    snapshots
}

#[tokio::test]
async fn a_stopped_scheduler_passes_no_more_even_when_woken() {
    let app = crate::support::TestApp::new().await;
    let scheduler = app.runtime.spawn();
    let began = std::time::Instant::now();
    while app.runtime.pass_timings().is_empty() {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(10),
            "the scheduler never passed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Woken, it passes again.
    let before = app.runtime.pass_timings().len();
    app.runtime.wake();
    while app.runtime.pass_timings().len() == before {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(10),
            "a wake-up did not reach the scheduler"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    scheduler.stop().await;
    let stopped_at = app.runtime.pass_timings().len();
    app.runtime.wake();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        app.runtime.pass_timings().len(),
        stopped_at,
        "no pass after the scheduler stopped"
    );
}

/// The tree, clusters and nodes a pass decides on are kept between passes (reading a thousand
/// nodes was most of a pass's reading); whatever may have changed them has the next pass read
/// them again.
#[tokio::test]
async fn a_pass_reads_the_nodes_again_after_a_change_here_a_silent_node_or_two_seconds_for_a_change_elsewhere(
) {
    use scheduler::Health;
    use server::{nodes::repo as nodes, runtime::PageSource};
    let app = crate::support::TestApp::new().await;
    let (node_token, _) = crate::support::seed_org(&app.pool).await;
    connect_n1(&app, &node_token).await;
    let n1: i64 = sqlx::query_scalar("select node_id from node where name = 'n1'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let decided_on = |now: i64| {
        let runtime = app.runtime.clone();
        async move {
            runtime.pass(now).await.unwrap();
            let PageSource::Latest(latest) = runtime.page_source(0) else {
                panic!("the pass's own snapshot");
            };
            let snapshots = (*latest).as_ref().expect("a tree");
            snapshots.cluster(1).expect("the default cluster").nodes[0].health
        }
    };
    assert_eq!(decided_on(crate::support::now()).await, Health::Healthy);

    // Cordoned through this server: the next pass decides with it.
    app.create_user("boss", "admin", "long enough 1").await;
    let admin = server::users::repo::find_user_by_username(&app.pool, "boss")
        .await
        .unwrap()
        .unwrap()
        .current_user();
    server::nodes::service::act(&app.pool, &app.runtime, &admin, "n1", "cordon")
        .await
        .unwrap();
    assert_eq!(decided_on(crate::support::now()).await, Health::Cordoned);

    // Back to service by another process on the same database (no word to this one): read again
    // within two seconds.
    nodes::set_admin_state(&app.pool, n1, app::nodes::NodeHealth::Healthy)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    assert_eq!(decided_on(crate::support::now()).await, Health::Healthy);

    // Silent past the deadline: the pass that marks it down decides with it down.
    let now = crate::support::now();
    nodes::touch_heartbeat(&app.pool, n1, now - 3_600)
        .await
        .unwrap();
    assert_eq!(decided_on(now).await, Health::Down);
}

/// The ledger's final hours are kept between passes (a week of them is 25,000 cells at 150
/// teams) and only the hours since are read: what a pass decides on is still what a whole read
/// gives, as hours close and charges arrive in the hour that has just ended.
#[tokio::test]
async fn a_pass_on_the_ledger_hours_it_kept_sees_what_a_whole_read_sees_as_hours_close() {
    use scheduler::HOUR;
    use server::runtime::{repo, PageSource};
    let app = crate::support::TestApp::new().await;
    let (node_token, _) = crate::support::seed_org(&app.pool).await;
    connect_n1(&app, &node_token).await;
    let leaves: Vec<i64> = sqlx::query_scalar("select budget_node_id from budget_node")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    let h = (crate::support::now() / HOUR + 1) * HOUR;
    let charge = |hour: i64, gpu_s: f64| {
        let pool = app.pool.clone();
        let leaf = leaves[leaves.len() - 1];
        async move {
            let mut db = pool.acquire().await.unwrap();
            repo::add_usage(&mut db, "charged_gpu_s", (1, leaf, hour, gpu_s))
                .await
                .unwrap();
        }
    };
    for (back, gpu_s) in [(3, 100.0), (2, 200.0), (1, 300.0)] {
        charge(h - back * HOUR, gpu_s).await;
    }
    for at in [
        h + 600,
        h + 600 + HOUR,
        h + 600 + 2 * HOUR,
        h + 900 + 2 * HOUR,
    ] {
        app.runtime.pass(at).await.unwrap();
        let PageSource::Latest(latest) = app.runtime.page_source(0) else {
            panic!("the pass's own snapshot");
        };
        let decided = (*latest).as_ref().expect("a tree");
        let whole = load_snapshots(&app, at).await;
        let (decided, whole) = (decided.cluster(1).unwrap(), whole.cluster(1).unwrap());
        for &leaf in &leaves {
            let id = whole.tree.engine_id(leaf).unwrap();
            assert_eq!(
                decided.engine.ledger().usage(id, at),
                whole.engine.ledger().usage(id, at),
                "budget node {leaf} at {}",
                at - h
            );
        }
        // Charged after the pass read: to the hour that has just ended (a run closed at the turn
        // of the hour) and to the current one.
        charge((at / HOUR - 1) * HOUR, 50.0).await;
        charge(at / HOUR * HOUR, 70.0).await;
    }
}
