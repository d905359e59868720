//! The Hourglass scheduling engine. Pure: no IO, no async, no clock — time is a value.
//!
//! # The model (DESIGN §3–§4)
//!
//! A [`BudgetTree`] says what fraction of the cluster's GPU time each program, project and
//! researcher is funded for; shares are versioned, each in force from a given time. The [`Ledger`]
//! keeps the GPU-seconds charged to every node over a sliding window (7 days by default) and
//! integrates what each node was funded for over the same window, with shares and healthy capacity
//! as they were. A node's ratio `usage / allocated` below 1 means under-served.
//!
//! [`Standings`] ranks leaves Fair-Tree style: siblings by ratio, ascending, read depth-first from
//! the root, so an under-served program's projects all come before an over-served program's. The
//! queue is allocated work (`min_runtime > 0`) by leaf rank, then priority, then submit time, then
//! unallocated work (`min_runtime = 0`, free, never charged) the same way, on idle GPUs only.
//!
//! Running allocated work is protected for its minimum runtime. After that, a waiting workload may
//! preempt it if, where their paths in the tree part, the running side's ratio exceeds the waiting
//! side's by more than the damping margin — or, for work that cannot resume (its progress would be
//! lost), by more than the wider kill margin. Unallocated work is preemptible by any allocated work.
//! The cheapest set of victims is chosen (free work first, non-resumable work last, least progress
//! lost), and every preemption carries a [`PreemptReason`].
//!
//! Debug work (DESIGN §4.11) goes first through a fast lane capped at a share of the cluster, and
//! may preempt unprotected resumable work of any leaf. The lane keeps a headroom: other allocated
//! work starts only while room for one more debug workload stays idle, free or preemptible, so a
//! cluster just filled with protected work still starts the next debug workload at once.
//!
//! Placement is best fit on one host, or whole hosts for larger workloads. A workload near the head
//! of the queue that cannot start reserves the GPUs that will be free or preemptible by it soonest
//! (the engine knows when every protection ends); other work starts there only if it will be
//! preemptible by then. Hosts that are cordoned or unhealthy take nothing new and drain each
//! workload as its protection ends; a host that is down loses its work at once.
//!
//! The [`Policy::Priority`] baseline (global priority, per-leaf cap of protected GPUs) runs behind
//! the same [`Engine::decide`], so the simulator can compare the two on one trace.
//!
//! # Driving it
//!
//! ```
//! use scheduler::*;
//!
//! let tree = BudgetTree::from_paths([("ai", 1.0), ("ai/olmo", 3.0), ("ai/molmo", 1.0)]).unwrap();
//! let olmo = tree.leaf("ai/olmo").unwrap();
//! let mut engine = Engine::new(tree, Config::default());
//! let now = 0;
//! // A fresh cluster: pretend it has been idle for a full window.
//! engine.ledger_mut().set_capacity(now - 7 * DAY, 8);
//!
//! let nodes = [NodeState { gpus: 8, health: Health::Healthy }];
//! let queued = [WorkloadSpec {
//!     id: WorkloadId(1),
//!     leaf: olmo,
//!     gpus: 4,
//!     min_runtime: 2 * HOUR,
//!     resumable: true,
//!     priority: 0,
//!     submitted_at: now,
//!     time_limit: None,
//! }];
//! let state = ClusterState { nodes: &nodes, running: &[], queued: &queued, ended_debug: &[] };
//! let decision = engine.decide(&state, now).unwrap();
//! for action in &decision.actions {
//!     if let Action::Start { workload, placement, .. } = action {
//!         // Apply it, then book the charge while it runs.
//!         engine.ledger_mut().start_charging(olmo, placement.gpu_count(), now);
//!         assert_eq!(*workload, WorkloadId(1));
//!     }
//! }
//! ```

mod baseline_book;
mod baseline_order;
mod cluster;
mod decayed;
mod decide;
mod engine;
mod explain;
mod health;
mod ids;
mod ledger;
mod lineup;
mod memo;
mod placement;
mod pool;
mod priority;
mod projection;
mod queue;
mod ranking;
mod reasons;
mod ruled_out;
mod settle;
mod shelf;
pub mod sim;
mod slurm;
mod snapshot;
mod tree;

pub use cluster::{GpuSet, Health, NodeGpus, NodeState, Placement, MAX_GPUS_PER_NODE};
pub use engine::{Config, Engine, Policy};
pub use explain::{Ahead, Explanation, PathStep, WaitReason};
pub use ids::{BudgetId, NodeId, Time, WorkloadId, DAY, HOUR};
pub use ledger::{Ledger, LedgerConfig};
pub use projection::{project, Estimate, Limits, Projection};
pub use queue::fair_share_order;
pub use ranking::{LevelComparison, Recent, Standings};
pub use reasons::{
    Action, AfterStop, Decision, DrainReason, DrainRule, Party, PreemptReason, PreemptRule,
    Protection, Reservation,
};
pub use settle::{Settle, MAX_PASSES_PER_MOMENT};
pub use slurm::SlurmConfig;
pub use snapshot::{
    Changes, ClusterState, EndedRun, RunningWorkload, SnapshotError, WorkloadSpec, DEBUG_MAX_GPUS,
    DEBUG_MAX_MIN_RUNTIME,
};
pub use tree::{BudgetTree, NodeLink, ShareVersion, TreeError};
