//! Who holds a host's GPUs, summed up for a gang that reserves (DESIGN §4.8): which leaves' work,
//! whether it can resume, and when the last protection there ends.
//!
//! A reserving gang ([`Pool::gang_outlook`]) asks of every host when it could have all of it:
//! never if some work there is of a leaf it may never take, else when the last protection there
//! ends (now, if it has ended). Read run by run, that is most of what a pass reserving for gangs
//! does, and a host's work rarely changes from one pass to the next. The summary is kept from pass
//! to pass until the host's runs change, and the gang's rule is said once per search as bits of
//! leaves ([`Blockers`]). A tree of more than 64 nodes leaves the work of leaves past bit 63 to be
//! read run by run.

use super::Pool;
use crate::ids::{BudgetId, Time};
use crate::queue::{leaf_order, LeafOrder};

/// Who holds GPUs on one host, as of when a search first asked since the host last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holders {
    /// Leaves (a bit each, by tree index) whose allocated work that cannot resume holds GPUs
    /// here.
    final_leaves: u64,
    /// Leaves whose allocated work that can resume holds GPUs here.
    resumable_leaves: u64,
    /// Some allocated work here is of a leaf past bit 63: the bits do not tell it all.
    unlisted: bool,
    /// The latest end of protection of the runs holding GPUs here (`Time::MIN` if none).
    protected_until: Time,
}

/// For the first few leaves with resumable work on a host (by the order their runs are listed),
/// that leaf's bit and its first such work there in queue order. Kept apart from [`Holders`], so
/// that a search reads the hosts' holders from one short list.
pub(crate) type Firsts = [Option<(u64, LeafOrder)>; 3];

/// The leaves whose allocated work keeps one reserving gang off a host for good, as bits (see
/// [`Holders`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Blockers {
    /// Leaves whose work that cannot resume the gang may never take.
    pub final_leaves: u64,
    /// Leaves whose resumable work the gang may never take.
    pub resumable_leaves: u64,
    /// The gang's own leaf and its place in the leaf's queue, if the gang may not take the leaf's
    /// resumable work: then work ahead of it there keeps it off the host, work behind does not.
    pub own: Option<(u64, LeafOrder)>,
}

impl Blockers {
    /// The bit of `leaf`, or `None` past bit 63.
    pub(crate) fn bit(leaf: BudgetId) -> Option<u64> {
        (leaf.index() < 64).then(|| 1u64 << leaf.index())
    }
}

impl Pool {
    /// What host `node`'s holders say of it to a gang that `blockers` describe: when it could
    /// have the whole host (`Some(None)`: never), or `None` where only its runs can tell.
    #[inline]
    pub(crate) fn ready_by_holders(
        &self,
        node: usize,
        blockers: &Blockers,
    ) -> Option<Option<Time>> {
        let holders = self.holders(node);
        if holders.final_leaves & blockers.final_leaves != 0
            || holders.resumable_leaves & blockers.resumable_leaves != 0
        {
            return Some(None);
        }
        if holders.unlisted {
            return None;
        }
        if let Some((own, tail)) = blockers.own {
            if holders.resumable_leaves & own != 0 {
                let firsts = self.firsts[node].get().expect("set with the holders");
                let first = firsts.iter().flatten().find(|f| f.0 == own)?;
                if first.1 < tail {
                    return Some(None);
                }
            }
        }
        Some(Some(holders.protected_until.max(self.now)))
    }

    /// Who holds GPUs on host `node` (see [`Holders`]).
    #[inline]
    pub(super) fn holders(&self, node: usize) -> &Holders {
        self.holders[node].get_or_init(|| self.find_holders(node))
    }

    #[inline(never)]
    fn find_holders(&self, node: usize) -> Holders {
        let mut known = Holders {
            final_leaves: 0,
            resumable_leaves: 0,
            unlisted: false,
            protected_until: Time::MIN,
        };
        let mut firsts: Firsts = [None; 3];
        for &(run, held) in self.slot_runs(node) {
            let r = &self.runs[run as usize];
            if !r.alive || held.is_empty() {
                continue;
            }
            if let Some(until) = r.protected_until {
                known.protected_until = known.protected_until.max(until);
            }
            if !r.spec.is_allocated() {
                continue;
            }
            let Some(bit) = Blockers::bit(r.spec.leaf) else {
                known.unlisted = true;
                continue;
            };
            if !r.spec.resumable {
                known.final_leaves |= bit;
                continue;
            }
            known.resumable_leaves |= bit;
            let tail = leaf_order(&r.spec);
            let slot = firsts
                .iter_mut()
                .find(|f| f.is_none_or(|(leaf, _)| leaf == bit));
            if let Some(first) = slot {
                *first = Some((bit, first.map_or(tail, |(_, t)| t.min(tail))));
            }
        }
        // Unset: `forget_holders` drops both.
        let _ = self.firsts[node].set(firsts);
        known
    }

    /// Drops what was learned of host `node`'s holders: its runs changed.
    pub(super) fn forget_holders(&mut self, node: usize) {
        self.holders[node].take();
        self.firsts[node].take();
        self.outlooks.get_mut().changed(node);
    }
}
