//! Reports: DTOs of the quarterly review and usage series, and their server functions.

use serde::{Deserialize, Serialize};

/// The review's headline (DESIGN §5), the figures the reference reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// `Σ min(delivered, owed) / Σ owed` over the teams (leaves with something owed).
    pub delivered_over_owed: Option<f64>,
    /// The worst team's `delivered / owed`, capped at 1.
    pub worst_team: Option<f64>,
    pub teams: usize,
    pub teams_at_95pct: usize,
    /// `Σ_h min(charged_h, owed_h) / Σ_h owed_h`.
    pub hourly: Option<f64>,
    pub occupancy: Option<f64>,
    pub unallocated_fraction: Option<f64>,
    pub debug_p90_wait_s: Option<i64>,
}

/// One tree node's quarter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRow {
    pub path: String,
    pub depth: usize,
    pub leaf: bool,
    /// Its share of the cluster at the end of the period.
    pub fraction: f64,
    pub funded_gpu_h: f64,
    pub owed_gpu_h: f64,
    pub delivered_gpu_h: f64,
    pub delivered_over_owed: Option<f64>,
    pub unallocated_gpu_h: f64,
    pub wait_p50_s: Option<i64>,
    pub wait_p90_s: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub from: i64,
    pub to: i64,
    pub label: String,
    pub headline: Headline,
    pub rows: Vec<ReviewRow>,
}

pub mod api {
    use super::Review;
    use crate::error::AppError;
    use leptos::prelude::*;

    /// The quarterly review of `year` quarter `quarter` (1–4).
    #[server(prefix = "/api", endpoint = "reports/quarter")]
    pub async fn quarterly_review(year: i32, quarter: u32) -> Result<Review, AppError> {
        use crate::backend::*;
        with_status(
            async {
                backend()?
                    .quarterly_review(&require_user()?, year, quarter)
                    .await
            }
            .await,
        )
    }
}
