//! Run segments: one contiguous run of a workload on its GPUs of one host, and the `--timeline`
//! CSV (DESIGN §6) that lets anyone recompute the report.

use std::fmt::Write as _;

use super::SimInput;
use crate::cluster::GpuSet;
use crate::ids::{BudgetId, NodeId, Time};

/// The timeline's header.
pub const TIMELINE_HEADER: &str =
    "workload,project,node,gpu_indices,start_s,end_s,allocated,protected_until_s,end";

/// How a segment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SegmentEnd {
    /// The workload finished.
    Completed,
    /// Preempted and requeued with its progress.
    Preempted,
    /// Drained off a host leaving service and requeued with its progress.
    Drained,
    /// Stopped and not resumable: its progress is lost and it leaves the simulation.
    Killed,
    /// Still running at the horizon (`end` is the horizon).
    Running,
}

impl SegmentEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentEnd::Completed => "completed",
            SegmentEnd::Preempted => "preempted",
            SegmentEnd::Drained => "drained",
            SegmentEnd::Killed => "killed",
            SegmentEnd::Running => "running",
        }
    }
}

/// One run of a workload on some GPUs of one host (a gang has one segment per host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The simulator's workload number: trace rows ordered by submit time, then line.
    pub job: u32,
    /// The workload's row in [`SimInput::trace`].
    pub row: u32,
    pub leaf: BudgetId,
    pub node: NodeId,
    pub gpus: GpuSet,
    pub start: Time,
    pub end: Time,
    /// Charged to its leaf (`min_runtime > 0`).
    pub allocated: bool,
    /// When its protection ended or ends: `start + min_runtime` under fair share; for the
    /// baseline's protected work, the segment's end (it is never preempted); `None` if never.
    pub protected_until: Option<Time>,
    pub end_kind: SegmentEnd,
}

impl Segment {
    pub fn gpu_seconds(&self) -> f64 {
        f64::from(self.gpus.count()) * (self.end - self.start) as f64
    }
}

/// Writes segments as the `--timeline` CSV, in the order given.
pub fn timeline_csv(input: &SimInput, segments: &[Segment]) -> String {
    let mut out = String::with_capacity(64 * (segments.len() + 1));
    out.push_str(TIMELINE_HEADER);
    out.push('\n');
    let mut indices = String::new();
    for s in segments {
        indices.clear();
        for (k, g) in s.gpus.indices().enumerate() {
            if k > 0 {
                indices.push(';');
            }
            let _ = write!(indices, "{g}");
        }
        let row = &input.trace[s.row as usize];
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},",
            row.id,
            row.project,
            input.cluster.nodes[s.node.0 as usize].name,
            indices,
            s.start,
            s.end,
            s.allocated
        );
        if let Some(t) = s.protected_until {
            let _ = write!(out, "{t}");
        }
        let _ = writeln!(out, ",{}", s.end_kind.as_str());
    }
    out
}
