//! The cluster as the engine sees it: GPU hosts, their health, and sets of GPUs on them.

use std::fmt;

use crate::ids::NodeId;

/// The most GPUs one host may have: a [`GpuSet`] is a 64-bit mask.
pub const MAX_GPUS_PER_NODE: u32 = 64;

/// A host's state (DESIGN §4.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Health {
    /// Takes new work.
    Healthy,
    /// Takes no new work; running work is drained as each passes its minimum runtime.
    Cordoned,
    /// As cordoned, set by health checks rather than by an admin.
    Unhealthy,
    /// Gone: its work is requeued (resumable) or failed at once.
    Down,
}

impl Health {
    pub fn takes_new_work(self) -> bool {
        self == Health::Healthy
    }
}

/// One GPU host in a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// GPUs on the host, 1..=64, numbered `0..gpus`.
    pub gpus: u32,
    pub health: Health,
}

/// A set of GPU indices on one host.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuSet(pub u64);

impl GpuSet {
    pub const EMPTY: GpuSet = GpuSet(0);

    /// GPUs `0..n`.
    pub fn first(n: u32) -> GpuSet {
        if n >= 64 {
            GpuSet(u64::MAX)
        } else {
            GpuSet((1u64 << n) - 1)
        }
    }

    /// The set of exactly these indices.
    pub fn of(indices: &[u32]) -> GpuSet {
        GpuSet(indices.iter().fold(0, |m, &i| m | (1u64 << i)))
    }

    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, index: u32) -> bool {
        index < 64 && self.0 & (1u64 << index) != 0
    }

    pub fn union(self, other: GpuSet) -> GpuSet {
        GpuSet(self.0 | other.0)
    }

    pub fn intersection(self, other: GpuSet) -> GpuSet {
        GpuSet(self.0 & other.0)
    }

    pub fn without(self, other: GpuSet) -> GpuSet {
        GpuSet(self.0 & !other.0)
    }

    /// The `n` lowest indices of this set (all of it if it has fewer).
    pub fn lowest(self, n: u32) -> GpuSet {
        let mut rest = self.0;
        let mut out = 0u64;
        for _ in 0..n {
            if rest == 0 {
                break;
            }
            let bit = rest & rest.wrapping_neg();
            out |= bit;
            rest ^= bit;
        }
        GpuSet(out)
    }

    /// Indices in ascending order.
    pub fn indices(self) -> impl Iterator<Item = u32> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let index = rest.trailing_zeros();
            rest &= rest - 1;
            Some(index)
        })
    }
}

impl fmt::Debug for GpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.indices()).finish()
    }
}

/// Some GPUs on one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeGpus {
    pub node: NodeId,
    pub gpus: GpuSet,
}

/// Where a workload runs: GPUs on one host, or whole hosts for a gang (DESIGN §4.8).
/// Parts are sorted by node and name each node once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Placement {
    pub parts: Vec<NodeGpus>,
}

impl Placement {
    /// GPUs on a single host.
    pub fn on(node: NodeId, gpus: GpuSet) -> Placement {
        Placement {
            parts: vec![NodeGpus { node, gpus }],
        }
    }

    /// GPUs held. A gang holds every GPU of its hosts, which may exceed what it asked for when
    /// hosts differ in size; drivers charge what is held.
    pub fn gpu_count(&self) -> u32 {
        self.parts.iter().map(|p| p.gpus.count()).sum()
    }

    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.parts.iter().map(|p| p.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_takes_the_smallest_indices() {
        let set = GpuSet::of(&[1, 3, 4, 7]);
        assert_eq!(set.lowest(2), GpuSet::of(&[1, 3]));
        assert_eq!(set.lowest(9), set);
        assert_eq!(set.indices().collect::<Vec<_>>(), [1, 3, 4, 7]);
        assert_eq!(GpuSet::first(64).count(), 64);
    }
}
