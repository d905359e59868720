//! `hourglass serve --demo`: an organisation, simulated GPU nodes running real processes, a month
//! of usage history, and a trickle of new workloads so every page has something to show.

pub mod history;
pub mod org;
pub mod repo;
pub mod trickle;

use crate::{
    agent::client::{self, AgentOptions},
    nodes::repo as node_repo,
    secrets, ServerError,
};
use sqlx::AnyPool;
use std::net::SocketAddr;

/// Demo nodes: name, simulated GPU count, and cluster. Two clusters, as a lab that rolled out
/// cluster by cluster would have.
pub const NODES: [(&str, u32, &str); 4] = [
    ("gpu-a1", 8, "h100"),
    ("gpu-a2", 8, "h100"),
    ("gpu-b1", 8, "b200"),
    ("gpu-b2", 4, "b200"),
];

/// The demo's clusters, in the order the history is made.
pub const CLUSTERS: [&str; 2] = ["h100", "b200"];

/// The demo node named `name`, registered in its cluster if it is not yet.
async fn demo_node(
    pool: &AnyPool,
    name: &str,
    cluster: &str,
    now: i64,
) -> Result<node_repo::NodeRow, ServerError> {
    if let Some(node) = node_repo::find_node_by_name(pool, name).await? {
        return Ok(node);
    }
    let mut tx = crate::db::begin_write(pool).await?;
    let cluster = crate::clusters::ensure(&mut tx, cluster, now).await?;
    // The agent gets its token when the demo starts it.
    let hash = secrets::generate("hgn_").1;
    let node = node_repo::insert_node(&mut tx, name, cluster.cluster_id, &hash, now).await?;
    tx.commit().await?;
    Ok(node)
}

/// The `setting` row that marks a database `--demo` made (never read as a scheduler setting).
pub const MARKER: &str = "demo_database";

/// Seeds the organisation on an empty database and prints how to sign in. A database with people
/// of its own is refused: the demo would print accounts that do not exist there and add its
/// simulated nodes to a real cluster.
pub async fn prepare(pool: &AnyPool, now: i64) -> Result<(), ServerError> {
    let users = repo::usernames(pool).await?;
    let marked = crate::settings::repo::value(pool, MARKER).await?;
    // Demo databases made before the marker existed hold exactly the demo's people.
    let demo_people = !users.is_empty()
        && users.len() == org::PEOPLE.len()
        && org::PEOPLE
            .iter()
            .all(|(name, _, _)| users.iter().any(|u| u == name));
    if users.is_empty() {
        org::seed(pool, now).await?;
        history::backfill(pool, now, 30).await?;
        // The month's activity chart, rolled up before anyone asks (the runtime then keeps it up).
        crate::reports::activity_rollup::ensure(pool, now).await?;
        println!("Seeded the demo organisation and a month of usage history.");
    } else if marked.is_none() && !demo_people {
        return Err(ServerError::Config(format!(
            "--demo needs an empty database or one --demo made, and this one has {} people of its own; \
             serve it without --demo, or give --demo a new database (e.g. --database sqlite://data/demo.db)",
            users.len()
        )));
    }
    if marked.is_none() {
        repo::mark(pool, MARKER, now).await?;
    }
    println!("Demo accounts (password for all: {}):", org::PASSWORD);
    for (name, role, what) in org::PEOPLE {
        println!("  {name:<6} {role:<10} {what}");
    }
    Ok(())
}

/// Starts one in-process agent per demo node against the server at `addr`. Each start gives the
/// node a fresh token (only hashes are stored, so old ones cannot be reused). The agents stop
/// their runs when the process is asked to stop (they hear the same SIGINT/SIGTERM); the caller
/// waits on the returned tasks so that no run outlives the demo.
pub async fn start_agents(
    pool: &AnyPool,
    addr: SocketAddr,
    now: i64,
) -> Result<Vec<tokio::task::JoinHandle<()>>, ServerError> {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let server = format!("http://{host}:{}", addr.port());
    let mut agents = Vec::new();
    for (name, gpus, cluster) in NODES {
        let (token, hash) = secrets::generate("hgn_");
        let node = demo_node(pool, name, cluster, now).await?;
        node_repo::set_token_hash(pool, node.node_id, &hash).await?;
        let options = AgentOptions {
            server: server.clone(),
            token,
            name: Some(name.to_string()),
            cluster: Some(node.cluster),
            gpus: gpus.to_string(),
            poll_s: 10,
            state_dir: std::env::temp_dir()
                .join(format!("hourglass-demo-{}", addr.port()))
                .join(name),
            health_cmd: None,
            health_interval_s: 60,
            sample_every_s: 10,
            simulate_utilization: true,
            ca_cert: None,
        };
        agents.push(tokio::spawn(async move {
            if let Err(error) = client::run(options).await {
                tracing::error!(%error, "demo agent stopped");
            }
        }));
    }
    Ok(agents)
}
