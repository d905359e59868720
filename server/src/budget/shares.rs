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
    let rows: Vec<Row> = sqlx::query_as(
        "select v.effective_from, v.effective_to, v.share, v.source, v.change_request_id,
            p.username as proposer, d.username as decided_by, r.justification
         from share_version v
         left join change_request r on r.change_request_id = v.change_request_id
         left join \"user\" p on p.user_id = r.proposer_id
         left join \"user\" d on d.user_id = r.decided_by
         where v.budget_node_id = $1 order by v.effective_from, v.share_version_id",
    )
    .bind(node)
    .fetch_all(&mut *db)
    .await?;
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
        })
        .collect();
    // The tree's first version also covers all time before it: the node's history starts with
    // its own first share.
    let since = versions.first().map_or(0, |v: &ShareVersionView| v.from);
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
