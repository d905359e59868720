//! Why a team received less than it was funded for, in words: it asked for less (demand-limited)
//! or it waited behind others (contention). Read from the review's own figures.

use super::ReviewRow;
use crate::workloads::sentences::duration;

/// Below this share of what it was owed, a team is said to have waited behind others.
const SHORT_OF_OWED: f64 = 0.95;
/// Below this share of its funding, a team is "far below" it and the page says why.
const FAR_BELOW_FUNDED: f64 = 0.8;
/// Less funded time than this is too little to explain (a cluster just started).
const MIN_FUNDED_GPU_H: f64 = 1.0;

/// A sentence for each team (leaf) under 95% of what it was owed or far below its funding;
/// others need none.
pub fn shortfalls(rows: &[ReviewRow]) -> Vec<(String, String)> {
    rows.iter()
        .filter(|r| r.leaf && r.funded_gpu_h >= MIN_FUNDED_GPU_H)
        .filter_map(|r| Some((r.path.clone(), shortfall(r)?)))
        .collect()
}

fn shortfall(r: &ReviewRow) -> Option<String> {
    let gpu_h = |x: f64| format!("{x:.0} GPU-h");
    let of_owed = (r.owed_gpu_h > 0.0).then(|| r.delivered_gpu_h / r.owed_gpu_h);
    let of_funded = r.delivered_gpu_h / r.funded_gpu_h;
    let waited = r
        .wait_p90_s
        .map(|w| format!("; 9 in 10 of its workloads started within {}", duration(w)))
        .unwrap_or_default();
    match of_owed {
        Some(x) if x < SHORT_OF_OWED => Some(format!(
            "Contention: it asked for its share and waited behind others — owed {}, delivered {} ({:.0}%){waited}.",
            gpu_h(r.owed_gpu_h),
            gpu_h(r.delivered_gpu_h),
            x * 100.0
        )),
        _ if of_funded < FAR_BELOW_FUNDED => Some(format!(
            "Demand-limited: it asked for less than it was funded for — funded {}, its work asked for {} of it, delivered {}.",
            gpu_h(r.funded_gpu_h),
            gpu_h(r.owed_gpu_h),
            gpu_h(r.delivered_gpu_h)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, funded: f64, owed: f64, delivered: f64) -> ReviewRow {
        ReviewRow {
            path: path.into(),
            depth: 2,
            leaf: true,
            fraction: 0.1,
            share_at_start: 0.1,
            share_at_end: 0.1,
            funded_gpu_h: funded,
            owed_gpu_h: owed,
            delivered_gpu_h: delivered,
            delivered_over_owed: (owed > 0.0).then(|| delivered / owed),
            unallocated_gpu_h: 0.0,
            wait_p50_s: Some(60),
            wait_p90_s: Some(7_200),
            utilization: None,
            utilized_gpu_h: 0.0,
        }
    }

    #[test]
    fn a_team_short_of_what_it_was_owed_waited_and_one_that_asked_for_less_is_demand_limited() {
        let rows = [
            row("lang/eval", 1_000.0, 900.0, 720.0),
            row("lang/data", 1_000.0, 300.0, 300.0),
            row("lang/posttrain", 1_000.0, 1_000.0, 1_100.0),
            // A cluster that has just started: too little to say anything about.
            row("lang/new", 0.01, 0.0, 0.0),
        ];
        let said = shortfalls(&rows);
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0].0, "lang/eval");
        assert_eq!(
            said[0].1,
            "Contention: it asked for its share and waited behind others — owed 900 GPU-h, delivered 720 GPU-h (80%); 9 in 10 of its workloads started within 2 h."
        );
        assert_eq!(said[1].0, "lang/data");
        assert!(said[1].1.starts_with("Demand-limited: it asked for less than it was funded for — funded 1000 GPU-h, its work asked for 300 GPU-h"));
    }
}
