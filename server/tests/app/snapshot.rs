//! What a scheduler pass reads: every node's health as the Nodes page states it, and the leader's
//! copy of the queue, which re-reads only the workloads named as changed.

use crate::support::{now, seed_org, TestDb};
use app::nodes::NodeHealth;
use server::{
    nodes::repo as nodes,
    runtime::{config::RuntimeConfig, queue_cache::COALESCE, PageSource, Runtime},
    workloads::repo as workloads,
};
use sqlx::AnyPool;

async fn open() -> (TestDb, AnyPool) {
    let db = TestDb::new().await;
    let pool = server::db::open(&db.url).await.unwrap();
    seed_org(&pool).await;
    (db, pool)
}

#[tokio::test]
async fn a_pass_reads_each_nodes_health_as_the_nodes_page_states_it() {
    let (_db, pool) = open().await;
    let t = now();
    // One node per way a node can stand; "n1" (registered by the seed, never connected) has no
    // GPUs and is not a pass's to place work on.
    let mut ids = Vec::new();
    for name in ["ok", "silent", "sick", "cordoned", "marked", "never-spoke"] {
        let (node, _) = server::nodes::service::register_node(&pool, name, None, t)
            .await
            .unwrap();
        nodes::record_gpus(&pool, node.node_id, 8, "H100")
            .await
            .unwrap();
        if name != "never-spoke" {
            nodes::touch_heartbeat(&pool, node.node_id, t)
                .await
                .unwrap();
        }
        ids.push(node.node_id);
    }
    nodes::touch_heartbeat(&pool, ids[1], t - 3_600)
        .await
        .unwrap();
    nodes::mark_silent_nodes_down(&pool, t - 60, t)
        .await
        .unwrap();
    nodes::set_agent_health(&pool, ids[2], Some(("GPU 3 fell off the bus", t)))
        .await
        .unwrap();
    nodes::set_admin_state(&pool, ids[3], NodeHealth::Cordoned)
        .await
        .unwrap();
    nodes::set_admin_state(&pool, ids[4], NodeHealth::Unhealthy)
        .await
        .unwrap();

    let page: Vec<(i64, NodeHealth)> = nodes::list_nodes(&pool)
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.gpu_count > 0)
        .map(|n| (n.node_id, n.health()))
        .collect();
    let pass: Vec<(i64, NodeHealth)> = nodes::pass_nodes(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.node_id, n.health))
        .collect();
    assert_eq!(pass, page);
    let states: Vec<NodeHealth> = pass.iter().map(|p| p.1).collect();
    use NodeHealth::*;
    assert_eq!(
        states,
        [Healthy, Down, Unhealthy, Cordoned, Unhealthy, Down]
    );
    // The ledger's capacity counts the healthy one's 8 GPUs.
    let healthy = nodes::healthy_gpus(&pool).await.unwrap();
    assert_eq!(healthy, [(server::clusters::DEFAULT_ID, 8)]);
}

/// Queues a workload of ada's on `ai/olmo` straight in the database, as another process would.
async fn queue_behind_the_servers_back(pool: &AnyPool, name: &str) -> i64 {
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
    workloads::insert_workload(
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
        now(),
    )
    .await
    .unwrap()
}

/// Ends a workload straight in the database, as another process would.
async fn cancel_behind_the_servers_back(pool: &AnyPool, id: i64) {
    let mut db = pool.acquire().await.unwrap();
    workloads::leave_run(
        &mut *db,
        id,
        app::workloads::WorkloadState::Cancelled,
        None,
        now(),
    )
    .await
    .unwrap();
}

async fn active_ids(runtime: &Runtime, pool: &AnyPool) -> Vec<i64> {
    let mut db = pool.acquire().await.unwrap();
    let active = runtime.active_workloads(&mut db).await.unwrap();
    active.rows.keys().copied().collect()
}

#[tokio::test]
async fn the_leaders_copy_of_the_queue_rereads_what_it_is_told_changed_and_finds_what_it_was_not_told(
) {
    let (_db, pool) = open().await;
    let runtime = Runtime::new(pool.clone(), RuntimeConfig::default());
    let first = queue_behind_the_servers_back(&pool, "first").await;
    // The first pass takes the lease and reads the queue whole: from then on this replica keeps
    // a copy. (No node has GPUs: nothing starts.)
    runtime.pass(now()).await.unwrap();
    assert!(runtime.is_leader());
    assert_eq!(active_ids(&runtime, &pool).await, [first]);

    // Named: re-read, whatever else happened behind its back.
    let unnamed = queue_behind_the_servers_back(&pool, "unnamed").await;
    let named = queue_behind_the_servers_back(&pool, "named").await;
    runtime.workloads_changed([named]);
    assert_eq!(active_ids(&runtime, &pool).await, [first, named]);

    // A named workload that ended leaves the copy.
    cancel_behind_the_servers_back(&pool, first).await;
    runtime.workloads_changed([first]);
    assert_eq!(active_ids(&runtime, &pool).await, [named]);

    // Made behind its back and never named: the periodic check of the copy against the database
    // (one aggregate row) finds the difference and reads everything. (A pass renews the lease,
    // which a runtime nobody spawned lets lapse: a follower reads everything anyway.)
    tokio::time::sleep(server::runtime::active::CHECK_EVERY).await;
    runtime.pass(now()).await.unwrap();
    assert!(runtime.is_leader());
    assert_eq!(active_ids(&runtime, &pool).await, [unnamed, named]);

    // A change it cannot name (another replica's, forwarded as a bare wake-up) reads everything.
    let forwarded = queue_behind_the_servers_back(&pool, "forwarded").await;
    runtime.workloads_changed_unknown();
    assert_eq!(
        active_ids(&runtime, &pool).await,
        [unnamed, named, forwarded]
    );
}

fn source(runtime: &Runtime) -> &'static str {
    match runtime.page_source(runtime.queue_cache().generation()) {
        PageSource::Latest(_) => "the latest pass's snapshot",
        PageSource::Base(_) => "the latest pass's base under the copy",
        PageSource::Read => "a whole read",
    }
}

async fn queue_page_ids(runtime: &Runtime, pool: &AnyPool) -> Vec<i64> {
    let (rows, _) = server::workloads::service::queue(pool, runtime, 50, None)
        .await
        .unwrap();
    rows.iter().map(|r| r.workload.id).collect()
}

#[tokio::test]
async fn a_page_builds_on_the_latest_pass_while_only_workloads_changed_and_reads_whole_after_anything_else(
) {
    let (_db, pool) = open().await;
    let runtime = Runtime::new(pool.clone(), RuntimeConfig::default());
    let first = queue_behind_the_servers_back(&pool, "first").await;
    assert_eq!(source(&runtime), "a whole read", "no pass yet");
    runtime.pass(now()).await.unwrap();
    assert_eq!(source(&runtime), "the latest pass's snapshot");
    assert_eq!(queue_page_ids(&runtime, &pool).await, [first]);

    // A submission: the page shows it, from the leader's copy told of it, once the list shared
    // by everyone looking is rebuilt (pages are told to look again then).
    let second = queue_behind_the_servers_back(&pool, "second").await;
    runtime.workloads_changed([second]);
    runtime.wake_for_workloads();
    assert_eq!(source(&runtime), "the latest pass's base under the copy");
    tokio::time::sleep(COALESCE).await;
    assert_eq!(queue_page_ids(&runtime, &pool).await, [first, second]);

    // A cancel too.
    runtime.pass(now()).await.unwrap();
    cancel_behind_the_servers_back(&pool, first).await;
    runtime.workloads_changed([first]);
    runtime.wake_for_workloads();
    assert_eq!(source(&runtime), "the latest pass's base under the copy");
    tokio::time::sleep(COALESCE).await;
    assert_eq!(queue_page_ids(&runtime, &pool).await, [second]);

    // A change to more than workloads (shares, nodes, settings): the latest pass's tree and
    // ledger no longer hold, so pages read everything until the next pass.
    runtime.wake();
    assert_eq!(source(&runtime), "a whole read");
    runtime.pass(now()).await.unwrap();
    assert_eq!(source(&runtime), "the latest pass's snapshot");

    // The latest pass's ledger is a second old: pages no longer build on it.
    runtime.workloads_changed([second]);
    runtime.wake_for_workloads();
    tokio::time::sleep(server::runtime::queue_cache::MAX_AGE).await;
    assert_eq!(source(&runtime), "a whole read");
}

#[tokio::test]
async fn the_copys_check_against_the_database_waits_for_a_write_under_way_to_be_named() {
    let (_db, pool) = open().await;
    let runtime = Runtime::new(pool.clone(), RuntimeConfig::default());
    runtime.pass(now()).await.unwrap();

    // Committed, not yet named: a check now would take it for a change made elsewhere and read
    // every workload again. It waits for a moment with no write under way.
    let write = runtime.writing_workloads();
    let submitted = queue_behind_the_servers_back(&pool, "submitted").await;
    tokio::time::sleep(server::runtime::active::CHECK_EVERY).await;
    // The pass renews the lease (a runtime nobody spawned lets it lapse) and its check is due.
    runtime.pass(now()).await.unwrap();
    assert!(runtime.is_leader());
    assert_eq!(active_ids(&runtime, &pool).await, Vec::<i64>::new());

    write.committed([submitted]);
    assert_eq!(active_ids(&runtime, &pool).await, [submitted]);
}

#[tokio::test]
async fn pages_served_a_result_from_before_a_change_are_told_to_look_again_once() {
    let (_db, pool) = open().await;
    let runtime = Runtime::new(pool.clone(), RuntimeConfig::default());
    let mut announcements = runtime.assignments();
    let generation = runtime.queue_cache().generation();
    for _ in 0..3 {
        runtime.served_behind();
    }
    tokio::time::timeout(std::time::Duration::from_secs(5), announcements.changed())
        .await
        .expect("told to look again")
        .unwrap();
    assert_eq!(
        *announcements.borrow_and_update(),
        1,
        "one reminder for three"
    );
    assert_eq!(
        runtime.queue_cache().generation(),
        generation,
        "a reminder is not a change: the shared results stay"
    );
    tokio::time::sleep(server::runtime::queue_cache::COALESCE * 2).await;
    assert!(!announcements.has_changed().unwrap());
}
