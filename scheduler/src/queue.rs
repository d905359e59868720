//! Queue order (DESIGN §4.4): allocated work by leaf rank, then priority, then submit time; then
//! unallocated work ordered the same way, work that can resume before work that cannot (see
//! [`QueueKey::fair_share`]). Allocated work is bucketed by leaf rank in O(n), each bucket sorted
//! only when a scan reaches it; unallocated work is sorted a batch at a time.

use std::collections::BinaryHeap;

use crate::ids::{Time, WorkloadId};
use crate::lineup::{FreeWalk, Lineup};
use crate::pool::FreeFit;
use crate::ranking::Standings;
use crate::snapshot::WorkloadSpec;

/// Where work stands among its leaf's work of the same class (the fields of [`QueueKey`] after
/// the class and the leaf's rank): higher priority first, then earlier submitted, then lower id.
pub(crate) type LeafOrder = (i64, Time, WorkloadId);

pub(crate) fn leaf_order(w: &WorkloadSpec) -> LeafOrder {
    (-i64::from(w.priority), w.submitted_at, w.id)
}

/// A workload's place in queue order: smaller is earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct QueueKey {
    class_rank: u64,
    neg_priority: i64,
    submitted_at: Time,
    id: WorkloadId,
}

impl QueueKey {
    /// Fair share's order. Unallocated work that can resume comes before unallocated work that
    /// cannot: free work is preemptible at any moment, and on a busy cluster most free work that
    /// cannot resume was stopped before it finished, its GPU time lost, where work that can
    /// resume keeps its progress (the README's "Free work that cannot resume" has the figures).
    pub(crate) fn fair_share(w: &WorkloadSpec, rank: u32) -> QueueKey {
        QueueKey {
            class_rank: QueueKey::fair_share_class_rank(w, rank),
            neg_priority: -i64::from(w.priority),
            submitted_at: w.submitted_at,
            id: w.id,
        }
    }

    /// The first field of [`QueueKey::fair_share`]: allocated work, then unallocated work that
    /// can resume, then the rest; each by leaf rank.
    fn fair_share_class_rank(w: &WorkloadSpec, rank: u32) -> u64 {
        let class: u64 = match (w.is_allocated(), w.resumable) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => 2,
        };
        (class << 32) | u64::from(rank)
    }

    /// The leaf rank it was built with (0 for the baseline).
    pub(crate) fn rank(&self) -> u32 {
        self.class_rank as u32
    }

    /// The SLURM peer's order: its integer job priority (higher first), then age.
    pub(crate) fn slurm(id: WorkloadId, submitted_at: Time, priority: u64) -> QueueKey {
        QueueKey {
            class_rank: u64::MAX - priority,
            neg_priority: 0,
            submitted_at,
            id,
        }
    }

    /// The baseline's order: global priority, then age.
    pub(crate) fn baseline(w: &WorkloadSpec) -> QueueKey {
        QueueKey {
            class_rank: 0,
            neg_priority: -i64::from(w.priority),
            submitted_at: w.submitted_at,
            id: w.id,
        }
    }
}

/// Fair share's queue order of `queued`, as a pass considers it (for the Queue page and the
/// API): indices into `queued`, first to last.
pub fn fair_share_order(queued: &[WorkloadSpec], standings: &Standings) -> Vec<usize> {
    let mut keyed: Vec<(QueueKey, usize)> = queued
        .iter()
        .enumerate()
        .map(|(i, w)| (QueueKey::fair_share(w, standings.leaf_rank(w.leaf)), i))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// Allocated work in buckets by leaf rank, each sorted only when the scan reaches it.
#[derive(Default)]
pub(crate) struct Queue {
    /// Queue indices grouped by rank.
    order: Vec<u32>,
    start: Vec<u32>,
    min_gpus: Vec<u32>,
    max_gpus: Vec<u32>,
    sorted: Vec<bool>,
    /// Debug workloads (the fast lane's), by queue index.
    debug: Vec<u32>,
    /// How many of each bucket are debug workloads.
    debug_count: Vec<u32>,
    /// The shortest minimum runtime among each bucket's resumable work (`Time::MAX` if none).
    shortest_resumable: Vec<Time>,
    /// Scratch for sorting a bucket: each member's order within it, and its queue index.
    keyed: Vec<((i64, Time, WorkloadId), u32)>,
    /// Read from the lineup, which keeps each bucket's members (see `decide::members`): `order`
    /// is left empty.
    from_lineup: bool,
}

impl Queue {
    /// Buckets the allocated workloads: O(n).
    pub(crate) fn fair_share(queued: &[WorkloadSpec], standings: &Standings) -> Queue {
        let ranks = standings.leaf_count();
        let mut start = vec![0u32; ranks + 1];
        let mut min_gpus = vec![u32::MAX; ranks];
        let mut max_gpus = vec![0; ranks];
        let mut debug = Vec::new();
        let mut debug_count = vec![0; ranks];
        let mut shortest_resumable = vec![Time::MAX; ranks];
        let mut members: Vec<(u32, u32)> = Vec::new();
        for (i, w) in queued.iter().enumerate() {
            if w.is_allocated() {
                let rank = standings.leaf_rank(w.leaf);
                start[rank as usize + 1] += 1;
                if w.resumable {
                    let shortest = &mut shortest_resumable[rank as usize];
                    *shortest = (*shortest).min(w.min_runtime);
                }
                min_gpus[rank as usize] = min_gpus[rank as usize].min(w.gpus);
                max_gpus[rank as usize] = max_gpus[rank as usize].max(w.gpus);
                if w.is_debug() {
                    debug.push(i as u32);
                    debug_count[rank as usize] += 1;
                }
                members.push((i as u32, rank));
            }
        }
        for r in 0..ranks {
            start[r + 1] += start[r];
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; members.len()];
        for &(i, rank) in &members {
            order[fill[rank as usize] as usize] = i;
            fill[rank as usize] += 1;
        }
        Queue {
            order,
            start,
            min_gpus,
            max_gpus,
            sorted: vec![false; ranks],
            debug,
            debug_count,
            shortest_resumable,
            keyed: Vec::new(),
            from_lineup: false,
        }
    }

    /// The same buckets read from the lineup kept between passes, each already in order.
    /// Reuses `queue`'s buffers (a pass's queue kept for the next: see `decide::Scratch`).
    pub(crate) fn from_lineup(mut queue: Queue, lineup: &Lineup, standings: &Standings) -> Queue {
        let ranks = standings.leaf_count();
        queue.order.clear();
        queue.start.clear();
        queue.min_gpus.clear();
        queue.max_gpus.clear();
        queue.sorted.clear();
        queue.sorted.resize(ranks, true);
        queue.debug.clear();
        queue.debug_count.clear();
        queue.shortest_resumable.clear();
        queue.keyed.clear();
        queue.from_lineup = true;
        // The lineup keeps each leaf's sizes, debug work and shortest resumable minimum
        // runtime: no workload's spec is read here.
        for &leaf in standings.leaves() {
            let summary = lineup.summary(leaf);
            queue.min_gpus.push(summary.min_gpus);
            queue.max_gpus.push(summary.max_gpus);
            queue.shortest_resumable.push(summary.shortest_resumable);
            let debug = lineup.debug(leaf);
            queue.debug.extend_from_slice(debug);
            queue.debug_count.push(debug.len() as u32);
        }
        queue
    }

    /// That this queue (read from the lineup) is the one [`Queue::fair_share`] builds, every
    /// bucket sorted (debug builds check it at every pass).
    #[cfg(debug_assertions)]
    pub(crate) fn assert_as_built(
        &self,
        queued: &[WorkloadSpec],
        standings: &Standings,
        lineup: &Lineup,
    ) {
        let mut built = Queue::fair_share(queued, standings);
        for (rank, &leaf) in standings.leaves().iter().enumerate() {
            let members = built.sorted_group(rank, queued);
            assert_eq!(lineup.allocated(leaf), members, "the lineup's order");
        }
        assert_eq!(
            (&self.min_gpus, &self.max_gpus),
            (&built.min_gpus, &built.max_gpus)
        );
        assert_eq!(self.debug_count, built.debug_count);
        assert_eq!(self.shortest_resumable, built.shortest_resumable);
        let mut debug = self.debug.clone();
        debug.sort_unstable();
        assert_eq!(debug, built.debug);
    }

    pub(crate) fn ranks(&self) -> usize {
        self.sorted.len()
    }

    /// Members of a bucket, in no particular order (a queue read from the lineup has none: the
    /// lineup keeps them).
    pub(crate) fn group(&self, rank: usize) -> &[u32] {
        debug_assert!(!self.from_lineup, "the lineup keeps the members");
        &self.order[self.start[rank] as usize..self.start[rank + 1] as usize]
    }

    pub(crate) fn min_gpus(&self, rank: usize) -> u32 {
        self.min_gpus[rank]
    }

    pub(crate) fn debug(&self) -> &[u32] {
        &self.debug
    }

    pub(crate) fn debug_count(&self, rank: usize) -> u32 {
        self.debug_count[rank]
    }

    pub(crate) fn max_gpus(&self, rank: usize) -> u32 {
        self.max_gpus[rank]
    }

    /// The shortest minimum runtime among a bucket's resumable work (`Time::MAX` if none).
    pub(crate) fn shortest_resumable(&self, rank: usize) -> Time {
        self.shortest_resumable[rank]
    }

    /// Members of a bucket in queue order.
    pub(crate) fn sorted_group(&mut self, rank: usize, queued: &[WorkloadSpec]) -> &[u32] {
        let range = self.start[rank] as usize..self.start[rank + 1] as usize;
        if !self.sorted[rank] {
            // Within a bucket the class and rank are the same: the order is priority, then
            // submit time, then id. Keys are made once, not at every comparison.
            self.keyed.clear();
            self.keyed.extend(
                self.order[range.clone()]
                    .iter()
                    .map(|&q| (leaf_order(&queued[q as usize]), q)),
            );
            self.keyed.sort_unstable();
            for (slot, &(_, q)) in self.order[range.clone()].iter_mut().zip(&self.keyed) {
                *slot = q;
            }
            debug_assert!(self.order[range.clone()]
                .is_sorted_by_key(|&q| { QueueKey::fair_share(&queued[q as usize], rank as u32) }));
            self.sorted[rank] = true;
        }
        &self.order[range]
    }
}

/// Unallocated work in queue order: picked from the whole queue, or walked from the lineup.
pub(crate) enum FreeOrder<'a> {
    Picked(FreeQueue<'a>),
    Walked(FreeWalk<'a>),
}

impl FreeOrder<'_> {
    /// See [`FreeQueue::next`].
    pub(crate) fn next(&mut self, fits: FreeFit, idle: u32) -> Option<(u32, u32)> {
        match self {
            FreeOrder::Picked(queue) => queue.next(fits, idle),
            FreeOrder::Walked(walk) => walk.next(fits),
        }
    }
}

/// Unallocated work in queue order, picked a batch at a time as it is taken.
///
/// Unallocated work only takes idle GPUs, after all allocated work. Idle GPUs only get fewer from
/// then on, so a workload that cannot fit when this scan begins never starts, and is left out;
/// and since every start takes a GPU, a scan starts at most as many workloads as there are idle
/// GPUs. So each batch is the first candidates in queue order after the previous batch that still
/// fit, picked in one pass over the queue with a bounded heap and then sorted: the first batch one
/// per idle GPU, each next one twice the size of the last, since a candidate may still find no
/// place (idle GPUs reserved for a gang, DESIGN §4.8). A long free queue waiting for a few idle
/// GPUs costs a few passes over it, not a sort of all of it, and never a pass per idle GPU.
pub(crate) struct FreeQueue<'a> {
    queued: &'a [WorkloadSpec],
    standings: &'a Standings,
    /// The current batch in queue order, and how many of it were taken.
    batch: Vec<(QueueKey, u32)>,
    taken: usize,
    /// No candidate is left after the current batch.
    last: bool,
    /// The size of the next batch.
    next_size: usize,
}

impl<'a> FreeQueue<'a> {
    pub(crate) fn new(queued: &'a [WorkloadSpec], standings: &'a Standings) -> FreeQueue<'a> {
        FreeQueue {
            queued,
            standings,
            batch: Vec::new(),
            taken: 0,
            last: false,
            next_size: 0,
        }
    }

    /// The next candidate in queue order that fits idle GPUs as they are now, and its leaf rank.
    /// `fits` may only have shrunk since the last call; `idle` is the idle GPUs left.
    pub(crate) fn next(&mut self, fits: FreeFit, idle: u32) -> Option<(u32, u32)> {
        loop {
            if self.taken == self.batch.len() {
                if self.last {
                    return None;
                }
                let after = self.batch.last().map(|b| b.0);
                let size = self.next_size.max(idle as usize).max(1);
                self.next_size = size.saturating_mul(2);
                self.pick(after, fits, size);
            }
            let (key, q) = *self.batch.get(self.taken)?;
            self.taken += 1;
            if fits.fits(&self.queued[q as usize]) {
                return Some((q, key.rank()));
            }
        }
    }

    /// The first `size` candidates after key `after` that `fits`, in queue order.
    fn pick(&mut self, after: Option<QueueKey>, fits: FreeFit, size: usize) {
        let mut heap: BinaryHeap<(QueueKey, u32)> = BinaryHeap::with_capacity(size);
        let mut more = false;
        for (i, w) in self.queued.iter().enumerate() {
            if w.is_allocated() || !fits.fits(w) {
                continue;
            }
            let rank = self.standings.leaf_rank(w.leaf);
            // A full batch only takes work of a better class or rank; most of a long queue stops
            // here.
            let class_rank = QueueKey::fair_share_class_rank(w, rank);
            if heap.len() == size && heap.peek().is_some_and(|top| class_rank > top.0.class_rank) {
                more = true;
                continue;
            }
            let key = QueueKey::fair_share(w, rank);
            if after.is_some_and(|a| key <= a) {
                continue;
            }
            if heap.len() < size {
                heap.push((key, i as u32));
            } else {
                more = true;
                if let Some(mut top) = heap.peek_mut().filter(|top| key < top.0) {
                    *top = (key, i as u32);
                }
            }
        }
        self.batch = heap.into_sorted_vec();
        self.taken = 0;
        self.last = !more;
    }
}
