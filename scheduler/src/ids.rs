//! Identifiers shared by every part of the engine.

use std::fmt;

/// Seconds since an epoch the driver chooses (Unix time in the server, trace start in the simulator).
pub type Time = i64;

/// One day in seconds, for configuration defaults and tests.
pub const DAY: Time = 86_400;
/// One hour in seconds.
pub const HOUR: Time = 3_600;

/// A workload, as the driver numbers it. Ties in every ordering fall back to this id, so it must be unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId(pub u64);

/// A node of the budget tree: an index into [`crate::BudgetTree`]'s arena. The root (the cluster) is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BudgetId(pub u32);

impl BudgetId {
    /// The root of every tree: the whole cluster.
    pub const ROOT: BudgetId = BudgetId(0);

    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// A GPU host: its position in [`crate::ClusterState::nodes`]. Drivers keep the names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
