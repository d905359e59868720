//! The quarter-over-quarter trend: the reviews of the last quarters, each node's side by side.

use super::review;
use crate::ServerError;
use app::{
    calendar::Fiscal,
    reports::{Trend, TrendCell, TrendQuarter, TrendRow},
};
use sqlx::AnyPool;
use std::collections::HashMap;

/// The quarters a trend shows by default (a year).
pub const QUARTERS: u32 = 4;
/// The most one trend covers (two years).
pub const MAX_QUARTERS: u32 = 8;

/// The quarter before `(year, quarter)`.
fn previous((year, quarter): (i32, u32)) -> (i32, u32) {
    if quarter <= 1 {
        (year - 1, 4)
    } else {
        (year, quarter - 1)
    }
}

/// Up to `count` fiscal quarters ending with `last` (without it, the one `now` falls in), oldest
/// first; quarters that ended before anything was recorded are left out, the last one never.
pub async fn trend(
    pool: &AnyPool,
    fiscal: Fiscal,
    last: Option<(i32, u32)>,
    count: u32,
    now: i64,
) -> Result<Trend, ServerError> {
    if !(1..=MAX_QUARTERS).contains(&count) {
        return Err(ServerError::invalid(
            "quarters",
            format!("quarters: a trend shows 1 to {MAX_QUARTERS} quarters."),
        ));
    }
    let mut at = last.unwrap_or_else(|| fiscal.quarter_of(now));
    let mut reviews = Vec::new();
    for _ in 0..count {
        let r = review::quarter(pool, fiscal, Some(at), now, review::Scope::All).await?;
        let before_data = r.data_since.is_none_or(|since| r.to <= since);
        if before_data && !reviews.is_empty() {
            break;
        }
        reviews.push(r);
        at = previous(at);
    }
    reviews.reverse();
    Ok(side_by_side(reviews))
}

/// One row per node of any review (in the latest tree's order, then nodes since retired), one
/// cell per review.
fn side_by_side(reviews: Vec<app::reports::Review>) -> Trend {
    let n = reviews.len();
    let mut rows: Vec<TrendRow> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, r) in reviews.iter().enumerate().rev() {
        for row in &r.rows {
            let at = *index.entry(row.path.clone()).or_insert_with(|| {
                rows.push(TrendRow {
                    path: row.path.clone(),
                    depth: row.depth,
                    leaf: row.leaf,
                    cells: vec![TrendCell::default(); n],
                });
                rows.len() - 1
            });
            rows[at].cells[i] = TrendCell {
                owed_gpu_h: row.owed_gpu_h,
                delivered_gpu_h: row.delivered_gpu_h,
                delivered_over_owed: row.delivered_over_owed,
                utilization: row.utilization,
            };
        }
    }
    let quarters = reviews
        .into_iter()
        .map(|r| {
            let (year, quarter) = r.quarter.unwrap_or_default();
            TrendQuarter {
                year,
                quarter,
                label: r.label,
                from: r.from,
                to: r.to,
                delivered_over_owed: r.headline.delivered_over_owed,
            }
        })
        .collect();
    Trend { quarters, rows }
}

/// The CSV header of [`csv`]: one line per node and quarter (what a pivot table wants).
pub const CSV_HEADER: &str =
    "path,quarter,from,owed_gpu_h,delivered_gpu_h,delivered_over_owed,mean_utilization";

/// The trend as CSV, formula-safe.
pub fn csv(trend: &Trend) -> String {
    let num = |x: f64| format!("{x:.4}");
    let opt = |v: Option<f64>| v.map(num).unwrap_or_default();
    let mut out = csv::Writer::from_writer(Vec::new());
    let _ = out.write_record(CSV_HEADER.split(','));
    for row in &trend.rows {
        for (q, cell) in trend.quarters.iter().zip(&row.cells) {
            let _ = out.write_record([
                super::csv_out::text_cell(&row.path),
                q.label.clone(),
                app::calendar::format_date(q.from),
                num(cell.owed_gpu_h),
                num(cell.delivered_gpu_h),
                opt(cell.delivered_over_owed),
                opt(cell.utilization),
            ]);
        }
    }
    super::csv_out::written(out)
}

#[cfg(test)]
mod tests {
    use super::previous;

    #[test]
    fn the_quarter_before_the_first_is_the_last_of_the_year_before() {
        assert_eq!(previous((2027, 1)), (2026, 4));
        assert_eq!(previous((2026, 3)), (2026, 2));
    }
}
