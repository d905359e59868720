//! A tree node's share history: its share versions with where each came from, and its effective
//! share of the cluster at every moment a share on its path changed. Anyone signed in reads it,
//! as they read the tree.

use crate::ServerError;
use app::budget::shares::{ShareHistory, ShareSource, ShareVersionView};
use sqlx::AnyPool;

#[derive(sqlx::FromRow)]
struct Row {
    effective_from: i64,
    effective_to: Option<i64>,
    share: f64,
    source: String,
    change_request_id: Option<i64>,
    proposer: Option<String>,
    decided_by: Option<String>,
    justification: Option<String>,
    cluster: Option<String>,
}

pub async fn history(pool: &AnyPool, path: &str) -> Result<ShareHistory, ServerError> {
    let path = path.trim().trim_matches('/');
    if path.is_empty() {
        return Err(ServerError::invalid(
            "path",
            "path: the cluster is the whole and has no share; name a node below it.",
        ));
    }
    let mut db = pool.acquire().await?;
    let node = super::node_id(&mut db, path).await?;
    // The tree's versions, then the shares approved for one cluster alone (overrides).
    let mut rows: Vec<Row> = Vec::new();
    // (table, where each came from, its cluster, the join naming that cluster, its id column)
    let tables = [
        (
            "share_version",
            "v.source",
            "cast(null as text)",
            "",
            "share_version_id",
        ),
        (
            "share_override",
            "'request'",
            "c.name",
            "join cluster c on c.cluster_id = v.cluster_id",
            "share_override_id",
        ),
    ];
    for (table, source, cluster, cluster_join, id) in tables {
        let sql = format!(
            "select v.effective_from, v.effective_to, v.share, {source} as source, v.change_request_id,
                p.username as proposer, d.username as decided_by, r.justification, {cluster} as cluster
             from {table} v {cluster_join}
             left join change_request r on r.change_request_id = v.change_request_id
             left join \"user\" p on p.user_id = r.proposer_id
             left join \"user\" d on d.user_id = r.decided_by
             where v.budget_node_id = $1 order by v.effective_from, v.{id}"
        );
        rows.extend(
            sqlx::query_as::<_, Row>(&sql)
                .bind(node)
                .fetch_all(&mut *db)
                .await?,
        );
    }
    // Oldest first; at the same moment, the tree's version before a cluster's.
    rows.sort_by(|a, b| {
        (a.effective_from, a.cluster.is_some()).cmp(&(b.effective_from, b.cluster.is_some()))
    });
    let versions: Vec<ShareVersionView> = rows
        .into_iter()
        .map(|r| ShareVersionView {
            from: r.effective_from,
            to: r.effective_to,
            share: r.share,
            origin: match (r.source.as_str(), r.change_request_id) {
                ("request", Some(id)) => ShareSource::Request {
                    id,
                    proposer: r.proposer.unwrap_or_default(),
                    decided_by: r.decided_by,
                    justification: r.justification.unwrap_or_default(),
                },
                ("created", _) => ShareSource::Created,
                _ => ShareSource::Import,
            },
            cluster: r.cluster,
        })
        .collect();
    // The tree's first version also covers all time before it: the node's history starts with
    // its own first share.
    let since = versions
        .iter()
        .find(|v| v.cluster.is_none())
        .map_or(0, |v: &ShareVersionView| v.from);
    let mut fraction: Vec<(i64, f64)> = Vec::new();
    if let Some(snapshot) = super::snapshot::load(&mut db).await? {
        if let Some(id) = snapshot.engine_id(node) {
            for version in snapshot.tree.versions() {
                let f = version.fraction(id);
                let at = version.effective_from.max(since);
                match fraction.last_mut() {
                    Some(last) if last.0 == at => last.1 = f,
                    Some(last) if (last.1 - f).abs() <= 1e-12 => {}
                    _ => fraction.push((at, f)),
                }
            }
        }
    }
    Ok(ShareHistory {
        path: path.to_string(),
        versions,
        fraction,
    })
}
