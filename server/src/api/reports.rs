//! `/api/v1/reports/…`: the quarterly review and usage series (JSON and CSV).

use super::auth::ApiUser;
use crate::{
    reports::{calendar, review, trend, usage},
    AppState, ServerError,
};
use app::reports::Review;
use axum::{
    extract::{Query, State},
    http::header,
    response::IntoResponse,
    Json,
};
use serde::Deserialize;

/// A fiscal quarter (1–4) of a fiscal year (the Settings' start month); without both, this one.
#[derive(Deserialize)]
pub struct QuarterQuery {
    year: Option<i32>,
    quarter: Option<u32>,
    /// One cluster's review; without it, every cluster's.
    cluster: Option<String>,
}

/// The fiscal quarter asked for: both or neither (this quarter).
fn year_quarter(
    year: Option<i32>,
    quarter: Option<u32>,
) -> Result<Option<(i32, u32)>, ServerError> {
    match (year, quarter) {
        (Some(year), Some(quarter)) => Ok(Some((year, quarter))),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(ServerError::invalid(
            "year",
            "year: name the fiscal year of the quarter (2026).",
        )),
        (Some(_), None) => Err(ServerError::invalid(
            "quarter",
            "quarter: name the quarter of the year (1, 2, 3 or 4).",
        )),
    }
}

/// The review of the quarter asked for, or why there is none.
/// With `each`, over every cluster, each one's headline too.
async fn review_of(state: &AppState, q: &QuarterQuery, each: bool) -> Result<Review, ServerError> {
    let scope =
        crate::workloads::service::cluster_filter(&state.pool, q.cluster.as_deref()).await?;
    review::quarter(
        &state.pool,
        state.runtime.config().fiscal(),
        year_quarter(q.year, q.quarter)?,
        state.runtime.now(),
        review::Scope::of(scope.as_ref(), each),
    )
    .await
}

/// The last `quarters` (default 4) fiscal quarters up to `year`/`quarter` (default: this one).
#[derive(Deserialize)]
pub struct TrendQuery {
    year: Option<i32>,
    quarter: Option<u32>,
    quarters: Option<u32>,
}

async fn trend_of(state: &AppState, q: &TrendQuery) -> Result<app::reports::Trend, ServerError> {
    trend::trend(
        &state.pool,
        state.runtime.config().fiscal(),
        year_quarter(q.year, q.quarter)?,
        q.quarters.unwrap_or(trend::QUARTERS),
        state.runtime.now(),
    )
    .await
}

/// `GET /api/v1/reports/trend?year=…&quarter=…&quarters=4`: each node's quarters side by side.
pub async fn trend(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<TrendQuery>,
) -> Result<Json<app::reports::Trend>, ServerError> {
    Ok(Json(trend_of(&state, &q).await?))
}

/// `GET /api/v1/reports/trend.csv?…`: the same, one line per node and quarter.
pub async fn trend_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<TrendQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let t = trend_of(&state, &q).await?;
    let last = t.quarters.last().map(|q| q.label.replace(' ', "-"));
    Ok(csv_download(
        format!("hourglass-trend-{}.csv", last.unwrap_or_default()),
        trend::csv(&t),
    ))
}

/// `-west` in a download's name for a review of cluster `west` alone, so two clusters' files do
/// not take the same name (the name was checked when the review was made).
fn of_cluster(cluster: Option<&str>) -> String {
    cluster
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map_or(String::new(), |c| format!("-{c}"))
}

/// A CSV body sent as a download named `filename`.
fn csv_download(filename: String, body: String) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
}

pub async fn quarter(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<QuarterQuery>,
) -> Result<Json<Review>, ServerError> {
    Ok(Json(review_of(&state, &q, true).await?))
}

/// `GET /api/v1/reports/quarter.csv?year=…&quarter=…`: the review's table, one row per tree
/// node, every column the page shows.
pub async fn quarter_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<QuarterQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let r = review_of(&state, &q, false).await?;
    Ok(csv_download(
        format!(
            "hourglass-{}{}.csv",
            r.label.replace(' ', "-"),
            of_cluster(q.cluster.as_deref())
        ),
        review::csv(&r),
    ))
}

/// Any period: `from` and `to` in epoch seconds or ISO 8601 (`2026-10-01`,
/// `2026-10-01T00:00:00Z`), `to` excluded.
#[derive(Deserialize)]
pub struct RangeQuery {
    from: Option<String>,
    to: Option<String>,
    /// One cluster's review; without it, every cluster's.
    cluster: Option<String>,
}

/// The review of the period asked for, or why there is none.
/// With `each`, over every cluster, each one's headline too.
async fn range_review(state: &AppState, q: &RangeQuery, each: bool) -> Result<Review, ServerError> {
    let from = calendar::moment_opt("from", q.from.as_deref())?.ok_or_else(|| {
        ServerError::invalid(
            "from",
            "from: the period's first day is required (2026-10-01 or epoch seconds).",
        )
    })?;
    let to = calendar::moment_opt("to", q.to.as_deref())?.ok_or_else(|| {
        ServerError::invalid(
            "to",
            "to: the day after the period's last is required (2027-01-01 or epoch seconds).",
        )
    })?;
    let scope =
        crate::workloads::service::cluster_filter(&state.pool, q.cluster.as_deref()).await?;
    review::period(
        &state.pool,
        state.runtime.config().fiscal(),
        from,
        to,
        state.runtime.now(),
        review::Scope::of(scope.as_ref(), each),
    )
    .await
}

/// `GET /api/v1/reports/review?from=…&to=…`: the review of any period.
pub async fn range(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<RangeQuery>,
) -> Result<Json<Review>, ServerError> {
    Ok(Json(range_review(&state, &q, true).await?))
}

/// `GET /api/v1/reports/review.csv?from=…&to=…`: that review's table.
pub async fn range_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<RangeQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let r = range_review(&state, &q, false).await?;
    Ok(csv_download(
        format!(
            "hourglass-{}-to-{}{}.csv",
            app::calendar::format_date(r.from),
            app::calendar::format_date(r.to - 1),
            of_cluster(q.cluster.as_deref())
        ),
        review::csv(&r),
    ))
}

#[derive(Deserialize)]
pub struct UsageQuery {
    from: Option<String>,
    to: Option<String>,
    #[serde(default)]
    node: String,
    #[serde(default)]
    granularity: String,
    cluster: Option<String>,
}

/// `GET /api/v1/reports/usage.csv?from=…&to=…&node=…&granularity=hour|day&cluster=…` (`from` and
/// `to` in epoch seconds or ISO 8601, `to` excluded; default: the last 7 days of the whole
/// cluster, per day; `cluster`: that cluster alone, otherwise every cluster together).
pub async fn usage_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<UsageQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let to = calendar::moment_opt("to", q.to.as_deref())?.unwrap_or_else(|| state.runtime.now());
    let from = calendar::moment_opt("from", q.from.as_deref())?.unwrap_or(to - 7 * 86_400);
    let granularity = usage::parse_granularity(&q.granularity)?;
    let cluster =
        crate::workloads::service::cluster_filter(&state.pool, q.cluster.as_deref()).await?;
    let series = usage::series(
        &state.pool,
        &q.node,
        cluster.as_ref(),
        from,
        to,
        granularity,
        state.runtime.now(),
    )
    .await?;
    let utilization = usage::utilization(
        &state.pool,
        &q.node,
        cluster.as_ref(),
        from,
        to,
        granularity,
    )
    .await?;
    let name = match &cluster {
        Some(c) => format!("hourglass-usage-{}.csv", c.name),
        None => "hourglass-usage.csv".to_string(),
    };
    Ok(csv_download(name, usage::csv(&series, &utilization)))
}

#[derive(Deserialize)]
pub struct PeopleQuery {
    path: String,
    from: Option<String>,
    to: Option<String>,
}

/// `GET /api/v1/reports/people?path=…&from=…&to=…`: who used a project's (or program's) GPUs in
/// the period (default: the last 30 days), most GPU-hours first.
pub async fn people(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<PeopleQuery>,
) -> Result<Json<serde_json::Value>, ServerError> {
    let now = state.runtime.now();
    let to = calendar::moment_opt("to", q.to.as_deref())?.unwrap_or(now);
    let from = calendar::moment_opt("from", q.from.as_deref())?.unwrap_or(to - 30 * 86_400);
    if to <= from {
        return Err(ServerError::invalid(
            "to",
            "to: the period must end after it starts.",
        ));
    }
    let people = crate::reports::people::by_person(&state.pool, &q.path, from, to, now).await?;
    Ok(Json(
        serde_json::json!({ "path": q.path, "from": from, "to": to, "people": people }),
    ))
}
