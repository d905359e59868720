//! The load test's organisation: programs of teams (one researcher each), nodes with tokens.

use crate::{
    budget::{import::import_org, org_file::OrgFile},
    nodes::repo as node_repo,
    secrets,
    tokens::service as tokens,
    users::{repo as user_repo, service},
    ServerError,
};
use sqlx::AnyPool;
use std::fmt::Write;

/// Teams per program.
const TEAMS_PER_PROGRAM: u32 = 15;
/// The password of every load-test person.
pub const PASSWORD: &str = "load test password";

/// A team (a leaf of the tree) and its one researcher.
#[derive(Debug, Clone)]
pub struct Team {
    pub project: String,
    pub person: String,
    /// Its API token (`Authorization: Bearer`).
    pub token: String,
    /// A debug team submits only short 1-GPU work, well inside its share: every one of its
    /// workloads fits and should start at once.
    pub debug: bool,
    /// Its share of the cluster, as a fraction of all GPUs.
    pub fraction: f64,
}

/// `leaves` teams under `ceil(leaves / 15)` programs of equal share; within a program, team `j`
/// has share `1 + j % 3`; the first team of each program is a debug team.
pub async fn organisation(pool: &AnyPool, leaves: u32, now: i64) -> Result<Vec<Team>, ServerError> {
    let programs = leaves.div_ceil(TEAMS_PER_PROGRAM);
    let mut shares = String::from("[shares]\n");
    let mut members = String::from("[members]\n");
    let mut teams = Vec::new();
    for p in 0..programs {
        let _ = writeln!(shares, "\"prog{p}\" = 1");
        let in_program: Vec<u32> = (0..TEAMS_PER_PROGRAM)
            .filter(|j| p * TEAMS_PER_PROGRAM + j < leaves)
            .collect();
        let total: u32 = in_program.iter().map(|j| 1 + j % 3).sum();
        for j in in_program {
            let k = p * TEAMS_PER_PROGRAM + j;
            let project = format!("prog{p}/team{j}");
            let person = format!("r{k}");
            let _ = writeln!(shares, "\"{project}\" = {}", 1 + j % 3);
            let _ = writeln!(members, "\"{project}\" = [\"{person}\"]");
            teams.push(Team {
                project,
                person,
                token: String::new(),
                debug: j == 0,
                fraction: (1 + j % 3) as f64 / total as f64 / programs as f64,
            });
        }
    }
    for team in &teams {
        service::create_user(pool, &team.person, "researcher", PASSWORD.into(), now).await?;
    }
    let org = OrgFile::parse(&format!("{shares}\n{members}"))?;
    import_org(pool, &org, now).await?;
    for team in &mut teams {
        let user = user_repo::find_user_by_username(pool, &team.person)
            .await?
            .ok_or_else(|| ServerError::Config(format!("{} was not created", team.person)))?;
        team.token = tokens::create_token(pool, user.user_id, "load test", now).await?;
    }
    Ok(teams)
}

/// Registers `count` nodes (`node0000`…); returns each name with its agent token.
pub async fn nodes(
    pool: &AnyPool,
    count: u32,
    now: i64,
) -> Result<Vec<(String, String)>, ServerError> {
    let mut nodes = Vec::new();
    let mut db = pool.acquire().await?;
    for n in 0..count {
        let name = format!("node{n:04}");
        let (token, hash) = secrets::generate("hgn_");
        node_repo::insert_node(&mut db, &name, crate::clusters::DEFAULT_ID, &hash, now).await?;
        nodes.push((name, token));
    }
    Ok(nodes)
}

/// Writes `days` of hourly ledger ending at the hour `now` is in: every team charged 90% of its
/// share of `gpus` each hour, owed as much, asking a third more; the cluster healthy throughout.
/// The ledger's cursors are set to `now`, so the runtime books on from there.
pub async fn ledger(
    pool: &AnyPool,
    teams: &[Team],
    gpus: u32,
    days: u32,
    now: i64,
) -> Result<(), ServerError> {
    use crate::bulk_insert::{insert, Value, USAGE_COLUMNS};
    use scheduler::{DAY, HOUR};
    if days == 0 {
        return Ok(());
    }
    let mut db = pool.acquire().await?;
    let leaves: std::collections::HashMap<String, i64> =
        sqlx::query_as::<_, (i64, String)>("select budget_node_id, path from budget_node")
            .fetch_all(&mut *db)
            .await?
            .into_iter()
            .map(|(id, path)| (path, id))
            .collect();
    let end = now.div_euclid(HOUR) * HOUR;
    let hours: Vec<i64> = (end - i64::from(days) * DAY..end)
        .step_by(HOUR as usize)
        .collect();
    let capacity = f64::from(gpus) * HOUR as f64;
    let mut cells = Vec::new();
    for team in teams {
        let leaf = *leaves
            .get(&team.project)
            .ok_or_else(|| ServerError::Config(format!("{} was not imported", team.project)))?;
        let charged = 0.9 * team.fraction * capacity;
        for &hour in &hours {
            cells.push(vec![
                Value::Int(leaf),
                Value::Int(hour),
                Value::Real(charged),
                Value::Real(0.0),
                Value::Real(charged * 4.0 / 3.0),
                Value::Real(charged),
            ]);
        }
    }
    insert(&mut db, "usage_hour", USAGE_COLUMNS, cells.into_iter()).await?;
    insert(
        &mut db,
        "capacity_hour",
        &["hour", "healthy_gpu_s"],
        hours
            .iter()
            .map(|&hour| vec![Value::Int(hour), Value::Real(capacity)]),
    )
    .await?;
    for cursor in ["demand", "capacity"] {
        crate::runtime::repo::set_ledger_cursor(&mut *db, cursor, now).await?;
    }
    Ok(())
}
