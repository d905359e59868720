//! What preempting could gather on each host at most, in one short list that a single-host search
//! which preempts reads before the host itself.
//!
//! Such a search looks at every host, and most (nine in ten on the reference month) are ruled out
//! by one bound: their idle GPUs and those of runs anyone may preempt there are too few. Kept
//! here, the search reads one entry of 16 bytes a host instead of the host's record, known from
//! the first search that read the host until the host changes (its GPUs, runs or reservation:
//! every such change goes through [`Pool::touch`], and a pass taken back forgets the hosts it
//! changed) or the next protection there ends.

use super::Pool;
use crate::ids::Time;

/// A host's bound, as a search first read it: `at_most` GPUs idle or held by runs someone may
/// preempt, out of `size`, until `until`. Not known when `now >= until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bound {
    at_most: u8,
    size: u8,
    until: Time,
}

impl Bound {
    pub(super) const UNKNOWN: Bound = Bound {
        at_most: 0,
        size: 0,
        until: Time::MIN,
    };
}

impl Pool {
    /// When host `node` cannot give a single-host search that preempts `gpus`: what the search
    /// counts as the most the host could have given (as if it had read the host). `None`: read the
    /// host.
    #[inline]
    pub(crate) fn ruled_out_by_bound(&self, node: usize, gpus: u32) -> Option<u32> {
        let bound = self.bounds[node].get();
        if self.now >= bound.until || u32::from(bound.at_most) >= gpus {
            return None;
        }
        #[cfg(debug_assertions)]
        self.assert_bound(node, bound);
        let size = u32::from(bound.size);
        Some(if size < gpus {
            size
        } else {
            u32::from(bound.at_most)
        })
    }

    /// Notes what a search read of host `node`: its idle GPUs and possible victims' (`at_most`,
    /// on a host no reservation holds) until `until`, or that it takes no new work.
    pub(crate) fn note_bound(&self, node: usize, at_most: u32, until: Time) {
        let slot = &self.slots[node];
        let bound = if !slot.schedulable() {
            Bound {
                at_most: 0,
                size: 0,
                until: Time::MAX,
            }
        } else if slot.reservation.is_none() && slot.size <= u32::from(u8::MAX) {
            Bound {
                at_most: at_most as u8,
                size: slot.size as u8,
                until,
            }
        } else {
            return;
        };
        self.bounds[node].set(bound);
    }

    /// Host `node` is about to change, or changed back.
    pub(super) fn forget_bound(&mut self, node: usize) {
        *self.bounds[node].get_mut() = Bound::UNKNOWN;
    }

    #[cfg(debug_assertions)]
    fn assert_bound(&self, node: usize, bound: Bound) {
        let slot = &self.slots[node];
        let fresh = if slot.schedulable() {
            assert!(
                slot.reservation.is_none(),
                "host {node}: a bound on a reserved host"
            );
            (slot.free.union(self.victim_gpus(node)).count(), slot.size)
        } else {
            (0, 0)
        };
        assert_eq!(
            (u32::from(bound.at_most), u32::from(bound.size)),
            fresh,
            "host {node}'s kept bound"
        );
    }
}
