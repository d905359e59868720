//! The Gantt chart's data: one row per GPU (hosts in cluster order, GPUs in index order), one bar
//! per run segment on that GPU, clipped to the requested window.

use app::lab::{Gantt, GanttBar};
use scheduler::sim::{Segment, SegmentEnd, SimInput};
use std::collections::HashMap;

/// The most rows one chart shows.
pub const MAX_ROWS: u32 = 256;

/// Bars of `segments` on the first `gpus` GPUs over `[from, to)` (clamped to the run's horizon).
pub fn build(
    input: &SimInput,
    segments: &[Segment],
    policy: &str,
    horizon: i64,
    gpus: u32,
    from: i64,
    to: i64,
) -> Gantt {
    let gpus = gpus.clamp(1, MAX_ROWS);
    let from = from.clamp(0, horizon.max(1) - 1);
    let to = to.clamp(from + 1, horizon.max(from + 1));

    // Row of (host, GPU index), for the first `gpus` GPUs.
    let mut rows = Vec::new();
    let mut row_of: HashMap<(u32, u32), u32> = HashMap::new();
    'hosts: for (host, node) in input.cluster.nodes.iter().enumerate() {
        for index in 0..node.gpus {
            if rows.len() as u32 == gpus {
                break 'hosts;
            }
            row_of.insert((host as u32, index), rows.len() as u32);
            rows.push(format!("{} · GPU {index}", node.name));
        }
    }

    let teams: Vec<String> = input
        .tree
        .leaves()
        .map(|id| input.tree.path(id).to_string())
        .collect();
    let team_of: HashMap<&str, u32> = teams
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), i as u32))
        .collect();

    let mut bars = Vec::new();
    for s in segments {
        if s.start >= to || s.end <= from || s.end <= s.start {
            continue;
        }
        let host = s.node.0;
        for index in s.gpus.indices() {
            let Some(&row) = row_of.get(&(host, index)) else {
                continue;
            };
            let trace = &input.trace[s.row as usize];
            bars.push(GanttBar {
                row,
                start: s.start.max(from),
                end: s.end.min(to),
                team: team_of
                    .get(input.tree.path(s.leaf))
                    .copied()
                    .unwrap_or_default(),
                protected_until: s.protected_until,
                preempted: matches!(s.end_kind, SegmentEnd::Preempted | SegmentEnd::Drained)
                    && s.end <= to,
                allocated: s.allocated,
                workload: trace.id.clone(),
            });
        }
    }
    bars.sort_by_key(|b| (b.row, b.start));
    Gantt {
        policy: policy.to_string(),
        from,
        to,
        horizon_s: horizon,
        rows,
        teams,
        bars,
    }
}
