//! Server functions of the Reports page.

use super::{ClusterActivity, Review, UsageSeries};
use crate::error::AppError;
use leptos::prelude::*;

/// The review of fiscal `year` quarter `quarter` (1–4); without them, this quarter. With each
/// cluster's headline beside the total when `each_cluster`.
#[server(prefix = "/api", endpoint = "reports/quarter")]
pub async fn quarterly_review(
    #[server(default)] year: Option<i32>,
    #[server(default)] quarter: Option<u32>,
    #[server(default)] each_cluster: bool,
) -> Result<Review, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .quarterly_review(&require_user()?, year, quarter, each_cluster)
                .await
        }
        .await,
    )
}

/// The review of the days `from` to `to` (`2026-10-01`, both included), with each cluster's
/// headline when `each_cluster`.
#[server(prefix = "/api", endpoint = "reports/period")]
pub async fn period_review(
    from: String,
    to: String,
    #[server(default)] each_cluster: bool,
) -> Result<Review, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .period_review(&require_user()?, from, to, each_cluster)
                .await
        }
        .await,
    )
}

/// The quarters up to fiscal `year` quarter `quarter` (without them, this one), side by side.
#[server(name = GetTrend, prefix = "/api", endpoint = "reports/trend")]
pub async fn quarter_trend(
    #[server(default)] year: Option<i32>,
    #[server(default)] quarter: Option<u32>,
) -> Result<super::Trend, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.trend(&require_user()?, year, quarter).await }.await)
}

/// Who used `path`'s GPUs over `[from, to)`, most GPU-hours first.
#[server(name = GetPeopleUsage, prefix = "/api", endpoint = "reports/people")]
pub async fn people_usage(
    path: String,
    from: i64,
    to: i64,
) -> Result<Vec<super::PersonUsage>, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .people_usage(&require_user()?, path, from, to)
                .await
        }
        .await,
    )
}

/// Usage of `node` (empty: the whole cluster) and its children over `[from, to)`, per
/// `granularity` (`hour` or `day`), on `cluster` alone (empty: every cluster together).
#[server(name = GetUsageSeries, prefix = "/api", endpoint = "reports/series")]
pub async fn usage_series(
    node: String,
    #[server(default)] cluster: String,
    from: i64,
    to: i64,
    granularity: String,
) -> Result<UsageSeries, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .usage_series(&require_user()?, node, cluster, from, to, granularity)
                .await
        }
        .await,
    )
}

/// Queue depth, waits and preemptions by reason over `[from, to)` per `granularity`.
#[server(name = GetClusterActivity, prefix = "/api", endpoint = "reports/activity")]
pub async fn cluster_activity(
    from: i64,
    to: i64,
    granularity: String,
) -> Result<ClusterActivity, AppError> {
    use crate::backend::*;
    with_status(
        async {
            backend()?
                .cluster_activity(&require_user()?, from, to, granularity)
                .await
        }
        .await,
    )
}
