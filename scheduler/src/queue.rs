//! Queue order (DESIGN §4.4): allocated work by leaf rank, then priority, then submit time; then
//! unallocated work ordered the same way. Bucketed by (class, leaf rank) in O(n); each bucket is
//! sorted only when a scan reaches it.

use crate::ids::{Time, WorkloadId};
use crate::ranking::Standings;
use crate::snapshot::WorkloadSpec;

/// A workload's place in queue order: smaller is earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct QueueKey {
    class_rank: u64,
    neg_priority: i64,
    submitted_at: Time,
    id: WorkloadId,
}

impl QueueKey {
    pub(crate) fn fair_share(w: &WorkloadSpec, rank: u32) -> QueueKey {
        let class = u64::from(!w.is_allocated());
        QueueKey {
            class_rank: (class << 32) | u64::from(rank),
            neg_priority: -i64::from(w.priority),
            submitted_at: w.submitted_at,
            id: w.id,
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

pub(crate) struct Queue {
    ranks: usize,
    /// Queue indices grouped by `class * ranks + rank`.
    order: Vec<u32>,
    start: Vec<u32>,
    min_gpus: Vec<u32>,
    sorted: Vec<bool>,
}

impl Queue {
    pub(crate) fn fair_share(queued: &[WorkloadSpec], standings: &Standings) -> Queue {
        let ranks = standings.leaf_count();
        let groups = 2 * ranks;
        let group_of = |w: &WorkloadSpec| {
            let class = usize::from(!w.is_allocated());
            class * ranks + standings.leaf_rank(w.leaf) as usize
        };
        let mut start = vec![0u32; groups + 1];
        let mut min_gpus = vec![u32::MAX; groups];
        let group: Vec<u32> = queued
            .iter()
            .map(|w| {
                let g = group_of(w);
                start[g + 1] += 1;
                min_gpus[g] = min_gpus[g].min(w.gpus);
                g as u32
            })
            .collect();
        for g in 0..groups {
            start[g + 1] += start[g];
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; queued.len()];
        for (i, &g) in group.iter().enumerate() {
            order[fill[g as usize] as usize] = i as u32;
            fill[g as usize] += 1;
        }
        Queue {
            ranks,
            order,
            start,
            min_gpus,
            sorted: vec![false; groups],
        }
    }

    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    fn index(&self, class: usize, rank: usize) -> usize {
        class * self.ranks + rank
    }

    /// Members of a bucket, in no particular order.
    pub(crate) fn group(&self, class: usize, rank: usize) -> &[u32] {
        let g = self.index(class, rank);
        &self.order[self.start[g] as usize..self.start[g + 1] as usize]
    }

    pub(crate) fn min_gpus(&self, class: usize, rank: usize) -> u32 {
        self.min_gpus[self.index(class, rank)]
    }

    /// Members of a bucket in queue order.
    pub(crate) fn sorted_group(
        &mut self,
        class: usize,
        rank: usize,
        queued: &[WorkloadSpec],
    ) -> &[u32] {
        let g = self.index(class, rank);
        let range = self.start[g] as usize..self.start[g + 1] as usize;
        if !self.sorted[g] {
            self.order[range.clone()]
                .sort_unstable_by_key(|&q| QueueKey::fair_share(&queued[q as usize], rank as u32));
            self.sorted[g] = true;
        }
        &self.order[range]
    }
}
