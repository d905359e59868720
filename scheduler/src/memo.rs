//! What a decision pass remembers about searches that failed, so that most of a long queue is
//! turned away without searching. Sound because, within a pass, only two things make placement
//! easier — a preemption leaving idle GPUs behind, a reservation being dropped — and the pool logs
//! the hosts where either happened; everything else (starts, fresh protected work, new
//! reservations) only makes it harder. A failure also rules out smaller requests when its search
//! showed no host could gather that many GPUs (`Failure::from`). What is remembered changes only
//! how much is searched, never what is found.

use std::rc::Rc;

use crate::queue::QueueKey;
use crate::snapshot::WorkloadSpec;

/// A request that found no placement at pool version `at`. A later request of at least `from` GPUs,
/// whose leaf may preempt no more than this one's, can only succeed on hosts that got easier since,
/// or on reserved hosts it may backfill and this one could not.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failure {
    pub spec: WorkloadSpec,
    pub key: QueueKey,
    pub gang: bool,
    pub at: u64,
    /// The smallest request this failure rules out: at most `spec.gpus`, less when the search
    /// showed that no host could gather more than `from - 1` GPUs for it. Every host's reach only
    /// shrinks until it is loosened, so a request of `from` GPUs fails wherever this one did.
    pub from: u32,
    /// For a gang: GPUs on the hosts it could have used (idle or preemptible throughout).
    pub reach: u32,
}

/// How many failures each leaf remembers.
const PER_LEAF: usize = 8;
/// How many of the latest failures of any leaf are kept. A later leaf that may preempt no more
/// than the failed one's leaf fails the same way: in Fair-Tree order that is the common case.
const RECENT: usize = 4;

pub(crate) struct Failures {
    by_rank: Vec<Vec<Failure>>,
    recent: Vec<(Failure, Rc<[u64]>)>,
    /// How many have been recorded: what a lookup finds changes only when this does.
    recorded: u64,
}

impl Failures {
    /// None yet, for a pass over `ranks` leaves, in the lists of a pass before (see
    /// [`Failures::into_lists`]) emptied.
    pub(crate) fn in_lists(mut by_rank: Vec<Vec<Failure>>, ranks: usize) -> Failures {
        by_rank.resize_with(ranks, Vec::new);
        for failures in &mut by_rank {
            failures.clear();
        }
        Failures {
            by_rank,
            recent: Vec::new(),
            recorded: 0,
        }
    }

    /// Its per-leaf lists, for the next pass to reuse. (Not the whole: the recent failures'
    /// bit sets are shared within a pass, and the engine that keeps the lists is shared between
    /// threads.)
    pub(crate) fn into_lists(self) -> Vec<Vec<Failure>> {
        self.by_rank
    }

    pub(crate) fn recorded(&self) -> u64 {
        self.recorded
    }

    /// The newest failure that covers a request of `gpus` from the leaf at `rank`, whose preemptible
    /// leaves are `eligible` (as from [`bits_from`]).
    pub(crate) fn latest_covering(
        &self,
        rank: u32,
        eligible: &[u64],
        gang: bool,
        gpus: u32,
    ) -> Option<Failure> {
        let other_leaves = self
            .recent
            .iter()
            .filter(|(_, bits)| is_subset(eligible, bits))
            .map(|(f, _)| f);
        self.by_rank[rank as usize]
            .iter()
            .chain(other_leaves)
            .filter(|f| f.gang == gang && gpus >= f.from)
            .max_by_key(|f| f.at)
            .copied()
    }

    pub(crate) fn record(&mut self, rank: u32, failure: Failure, eligible: &Rc<[u64]>) {
        self.recorded += 1;
        let mine = &mut self.by_rank[rank as usize];
        if mine.len() == PER_LEAF {
            mine.remove(0);
        }
        mine.push(failure);
        if self.recent.len() == RECENT {
            self.recent.remove(0);
        }
        self.recent.push((failure, eligible.clone()));
    }
}

/// A leaf's preemptible leaves as a bit set: `flag(rank)` for each of `len` ranks.
#[cfg(test)]
pub(crate) fn bits_from(len: usize, flag: impl Fn(usize) -> bool) -> Rc<[u64]> {
    (0..len.div_ceil(64))
        .map(|word| {
            (word * 64..len.min(word * 64 + 64))
                .fold(0, |bits, i| bits | u64::from(flag(i)) << (i - word * 64))
        })
        .collect()
}

fn is_subset(small: &[u64], big: &[u64]) -> bool {
    small.iter().zip(big).all(|(s, b)| s & !b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_sets_compare_as_subsets() {
        let few = bits_from(3, |rank| rank == 0);
        let many = bits_from(3, |rank| rank < 2);
        assert!(is_subset(&few, &many));
        assert!(!is_subset(&many, &few));
    }

    #[test]
    fn bit_sets_carry_ranks_past_the_first_word() {
        let bits = bits_from(70, |rank| rank == 1 || rank == 65);
        assert_eq!(&bits[..], &[0b10, 0b10]);
    }
}
