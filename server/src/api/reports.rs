//! `/api/v1/reports/…`: the quarterly review and usage series (JSON and CSV).

use super::auth::ApiUser;
use crate::{
    reports::{calendar, review, usage},
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

#[derive(Deserialize)]
pub struct QuarterQuery {
    year: i32,
    quarter: u32,
}

/// The review of the quarter asked for, or why there is none.
async fn review_of(state: &AppState, q: &QuarterQuery) -> Result<Review, ServerError> {
    let (from, to) = calendar::quarter(q.year, q.quarter)
        .ok_or_else(|| ServerError::invalid("quarter", "A quarter is 1, 2, 3 or 4."))?;
    let label = format!("Q{} {}", q.quarter, q.year);
    review::review(&state.pool, from, to, label, state.runtime.now()).await
}

pub async fn quarter(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<QuarterQuery>,
) -> Result<Json<Review>, ServerError> {
    Ok(Json(review_of(&state, &q).await?))
}

/// `GET /api/v1/reports/quarter.csv?year=…&quarter=…`: the review's table, one row per tree
/// node, every column the page shows.
pub async fn quarter_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<QuarterQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let r = review_of(&state, &q).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"hourglass-Q{}-{}.csv\"",
                    q.quarter, q.year
                ),
            ),
        ],
        review::csv(&r),
    ))
}

#[derive(Deserialize)]
pub struct UsageQuery {
    from: Option<i64>,
    to: Option<i64>,
    #[serde(default)]
    node: String,
    #[serde(default)]
    granularity: String,
}

/// `GET /api/v1/reports/usage.csv?from=…&to=…&node=…&granularity=hour|day` (epoch seconds;
/// default: the last 7 days of the whole cluster, per day).
pub async fn usage_csv(
    State(state): State<AppState>,
    ApiUser(_user): ApiUser,
    Query(q): Query<UsageQuery>,
) -> Result<impl IntoResponse, ServerError> {
    let to = q.to.unwrap_or_else(|| state.runtime.now());
    let from = q.from.unwrap_or(to - 7 * 86_400);
    let granularity = usage::parse_granularity(&q.granularity)?;
    let series = usage::series(
        &state.pool,
        &q.node,
        from,
        to,
        granularity,
        state.runtime.now(),
    )
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"hourglass-usage.csv\"",
            ),
        ],
        usage::csv(&series),
    ))
}
