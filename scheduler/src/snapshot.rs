//! The engine's input: one snapshot of the cluster, what runs on it and what waits.

use std::fmt;

use crate::cluster::{GpuSet, NodeState, Placement, MAX_GPUS_PER_NODE};
use crate::ids::{BudgetId, NodeId, Time, WorkloadId};
use crate::tree::BudgetTree;

/// What a workload asks for (DESIGN §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub id: WorkloadId,
    /// The leaf charged for it.
    pub leaf: BudgetId,
    pub gpus: u32,
    /// Seconds of protection per run. 0 makes it *unallocated*: free, never charged, and
    /// preemptible by any allocated workload at any moment.
    pub min_runtime: Time,
    pub resumable: bool,
    /// Higher first, and only among its own leaf's work (DESIGN §4.10).
    pub priority: i32,
    pub submitted_at: Time,
    /// Read only by the SLURM peer ([`crate::Policy::Slurm`]): the wall-time limit the user gave,
    /// which its backfill plans by. `None`: the partition's maximum.
    pub time_limit: Option<Time>,
}

impl WorkloadSpec {
    /// Allocated work is charged to its leaf and protected for `min_runtime`.
    pub fn is_allocated(&self) -> bool {
        self.min_runtime > 0
    }

    /// Debug work (DESIGN §5): allocated, a minimum runtime of at most 15 minutes, at most 8
    /// GPUs. It may use the fast lane (DESIGN §4.11).
    pub fn is_debug(&self) -> bool {
        self.is_allocated()
            && self.min_runtime <= DEBUG_MAX_MIN_RUNTIME
            && self.gpus <= DEBUG_MAX_GPUS
    }
}

/// Debug workloads: `0 < min_runtime ≤ 15 min` and at most this many GPUs.
pub const DEBUG_MAX_MIN_RUNTIME: Time = 15 * 60;
pub const DEBUG_MAX_GPUS: u32 = 8;

/// A workload on its GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningWorkload {
    pub spec: WorkloadSpec,
    /// Start of the current run; protection restarts with every run.
    pub started_at: Time,
    pub placement: Placement,
    /// Read only by the priority baseline: the workload started inside its leaf's cap of protected
    /// GPUs and so is never preempted. Drivers echo [`crate::Protection::UntilDone`] from the start.
    pub baseline_protected: bool,
}

impl RunningWorkload {
    /// When protection ends (DESIGN §4.5); `None` for unallocated work.
    pub fn protected_until(&self) -> Option<Time> {
        self.spec
            .is_allocated()
            .then(|| self.started_at.saturating_add(self.spec.min_runtime))
    }

    pub fn is_protected(&self, now: Time) -> bool {
        self.protected_until().is_some_and(|until| now < until)
    }

    /// This run as the fast lane's window counts it once it ends at `at`: debug work only.
    pub fn ended_debug_run(&self, at: Time) -> Option<EndedRun> {
        (self.spec.is_debug() && at > self.started_at).then(|| EndedRun {
            gpus: self.placement.gpu_count(),
            started_at: self.started_at,
            ended_at: at,
        })
    }
}

/// A run of debug work that has ended: what the fast lane used (DESIGN §4.11 caps its share of
/// capacity per window, so the engine needs the runs that ended within the window too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndedRun {
    pub gpus: u32,
    pub started_at: Time,
    pub ended_at: Time,
}

impl EndedRun {
    /// GPU-seconds of the run within `[from, to]`.
    pub fn gpu_seconds_within(&self, from: Time, to: Time) -> f64 {
        let span = self.ended_at.min(to) - self.started_at.max(from);
        f64::from(self.gpus) * span.max(0) as f64
    }
}

/// Everything the engine needs to decide at one moment. Borrowed, so a driver can keep its own
/// vectors and pass them on every wake-up without copying.
#[derive(Clone, Copy, Debug)]
pub struct ClusterState<'a> {
    /// Hosts, indexed by [`NodeId`].
    pub nodes: &'a [NodeState],
    pub running: &'a [RunningWorkload],
    pub queued: &'a [WorkloadSpec],
    /// Runs of debug work that ended within the fast lane's window before now
    /// ([`crate::Config::fast_lane_window`]; older ones are ignored). Empty: the lane counts only
    /// the debug work running now, so it may reach its peak at once.
    pub ended_debug: &'a [EndedRun],
}

/// What a driver changed in its snapshot since its previous pass, for
/// [`crate::Engine::decide_after`]: the engine then keeps what it built for one pass and brings it
/// up to date for the next instead of reading the whole snapshot again. The decisions are those of
/// [`crate::Engine::decide`] on the same snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Changes<'a> {
    /// The driver's count of passes, one more at each: what the engine kept is used only if it
    /// was kept at pass `pass - 1` (a driver that asked the engine something else in between may
    /// simply count on; one that lost count starts anywhere, and the engine builds afresh once).
    pub pass: u64,
    /// Every index of `running` whose entry may differ from the one at the same index in the
    /// previous pass's snapshot, in any order, repeats allowed. Indices past the shorter of the
    /// two lengths count as changed whether listed or not.
    pub running: &'a [u32],
    /// The same for `queued`.
    pub queued: &'a [u32],
}

impl Changes<'_> {
    /// The indices of `running` that may have changed, for a list `old` long at the previous
    /// pass and `new` long now: those named below both lengths and every one past the shorter,
    /// ascending, each once.
    /// Into `touched` (cleared first, its allocation reused).
    pub(crate) fn running_touched(&self, old: usize, new: usize, touched: &mut Vec<u32>) {
        touched_into(self.running, old, new, touched);
    }

    /// The same for `queued`.
    pub(crate) fn queued_touched(&self, old: usize, new: usize, touched: &mut Vec<u32>) {
        touched_into(self.queued, old, new, touched);
    }
}

fn touched_into(named: &[u32], old: usize, new: usize, touched: &mut Vec<u32>) {
    let (shorter, longer) = (old.min(new) as u32, old.max(new) as u32);
    touched.clear();
    touched.extend(named.iter().copied().filter(|&i| i < shorter));
    touched.extend(shorter..longer);
    touched.sort_unstable();
    touched.dedup();
}

/// Why a snapshot was rejected. The engine decides nothing on a bad snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// A host with 0 GPUs or more than [`MAX_GPUS_PER_NODE`].
    NodeSize { node: NodeId, gpus: u32 },
    /// The workload's leaf is not a leaf of the tree.
    UnknownLeaf {
        workload: WorkloadId,
        leaf: BudgetId,
    },
    /// A workload asking for no GPUs.
    NoGpus { workload: WorkloadId },
    /// A negative minimum runtime.
    NegativeMinRuntime { workload: WorkloadId },
    /// A running workload on a host or GPU that does not exist.
    PlacementOutOfRange { workload: WorkloadId, node: NodeId },
    /// A running workload whose placement holds fewer GPUs than it asked for, or none.
    PlacementTooSmall { workload: WorkloadId },
    /// Two running workloads on the same GPU.
    DoubleBooked {
        node: NodeId,
        gpu: u32,
        first: WorkloadId,
        second: WorkloadId,
    },
    /// The same id twice among running and queued workloads.
    DuplicateWorkload { workload: WorkloadId },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NodeSize { node, gpus } => {
                write!(
                    f,
                    "node {} has {gpus} GPUs (1..={MAX_GPUS_PER_NODE} allowed)",
                    node.0
                )
            }
            SnapshotError::UnknownLeaf { workload, leaf } => {
                write!(
                    f,
                    "workload {workload} is charged to {}, not a leaf of the tree",
                    leaf.0
                )
            }
            SnapshotError::NoGpus { workload } => write!(f, "workload {workload} asks for no GPUs"),
            SnapshotError::NegativeMinRuntime { workload } => {
                write!(f, "workload {workload} has a negative minimum runtime")
            }
            SnapshotError::PlacementOutOfRange { workload, node } => {
                write!(
                    f,
                    "workload {workload} runs on node {} which has no such GPU",
                    node.0
                )
            }
            SnapshotError::PlacementTooSmall { workload } => {
                write!(f, "workload {workload} holds fewer GPUs than it asked for")
            }
            SnapshotError::DoubleBooked {
                node,
                gpu,
                first,
                second,
            } => write!(
                f,
                "GPU {gpu} of node {} is held by both workload {first} and workload {second}",
                node.0
            ),
            SnapshotError::DuplicateWorkload { workload } => {
                write!(f, "workload {workload} appears twice")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

impl ClusterState<'_> {
    /// Checks every invariant the engine relies on. O(workloads + GPUs), plus a sort of the ids.
    pub fn validate(&self, tree: &BudgetTree) -> Result<(), SnapshotError> {
        for (i, node) in self.nodes.iter().enumerate() {
            if node.gpus == 0 || node.gpus > MAX_GPUS_PER_NODE {
                return Err(SnapshotError::NodeSize {
                    node: NodeId(i as u32),
                    gpus: node.gpus,
                });
            }
        }
        let check_spec = |spec: &WorkloadSpec| {
            if spec.leaf.index() >= tree.len() || !tree.is_leaf(spec.leaf) {
                return Err(SnapshotError::UnknownLeaf {
                    workload: spec.id,
                    leaf: spec.leaf,
                });
            }
            if spec.gpus == 0 {
                return Err(SnapshotError::NoGpus { workload: spec.id });
            }
            if spec.min_runtime < 0 {
                return Err(SnapshotError::NegativeMinRuntime { workload: spec.id });
            }
            Ok(())
        };
        let mut holder: Vec<Option<WorkloadId>> = Vec::new();
        let mut first_gpu = Vec::with_capacity(self.nodes.len() + 1);
        for node in self.nodes {
            first_gpu.push(holder.len());
            holder.resize(holder.len() + node.gpus as usize, None);
        }
        for run in self.running {
            check_spec(&run.spec)?;
            for part in &run.placement.parts {
                let node = self.nodes.get(part.node.index());
                let fits =
                    node.is_some_and(|n| part.gpus.without(GpuSet::first(n.gpus)).is_empty());
                if !fits {
                    return Err(SnapshotError::PlacementOutOfRange {
                        workload: run.spec.id,
                        node: part.node,
                    });
                }
                for gpu in part.gpus.indices() {
                    let slot = &mut holder[first_gpu[part.node.index()] + gpu as usize];
                    if let Some(first) = *slot {
                        return Err(SnapshotError::DoubleBooked {
                            node: part.node,
                            gpu,
                            first,
                            second: run.spec.id,
                        });
                    }
                    *slot = Some(run.spec.id);
                }
            }
            if run.placement.gpu_count() < run.spec.gpus {
                return Err(SnapshotError::PlacementTooSmall {
                    workload: run.spec.id,
                });
            }
        }
        for spec in self.queued {
            check_spec(spec)?;
        }
        match self.duplicate_id() {
            Some(workload) => Err(SnapshotError::DuplicateWorkload { workload }),
            None => Ok(()),
        }
    }

    /// A workload listed twice, if any. Drivers that keep their workloads by id (the server)
    /// list both vectors in id order: then a merge finds it without sorting 50,000 ids.
    fn duplicate_id(&self) -> Option<WorkloadId> {
        let running = || self.running.iter().map(|r| r.spec.id);
        let queued = || self.queued.iter().map(|q| q.id);
        if ascending(running()) && ascending(queued()) {
            let (mut r, mut q) = (running().peekable(), queued().peekable());
            while let (Some(&a), Some(&b)) = (r.peek(), q.peek()) {
                match a.cmp(&b) {
                    std::cmp::Ordering::Less => _ = r.next(),
                    std::cmp::Ordering::Greater => _ = q.next(),
                    std::cmp::Ordering::Equal => return Some(a),
                }
            }
            return None;
        }
        let mut ids: Vec<WorkloadId> = running().chain(queued()).collect();
        ids.sort_unstable();
        ids.windows(2).find(|w| w[0] == w[1]).map(|pair| pair[0])
    }
}

/// Whether the ids rise strictly.
fn ascending(mut ids: impl Iterator<Item = WorkloadId>) -> bool {
    let mut last = None;
    ids.all(|id| {
        let up = last.is_none_or(|l| l < id);
        last = Some(id);
        up
    })
}
