//! The SLURM peer's queue, taken in priority order lazily: a pass needs the head of the queue until
//! the first job that cannot start (it gets the reservation), and after that only the jobs that
//! could still start by backfilling, of which the first few usually take every GPU they can.
//! Sorting the whole queue at every event cost most of a run; here each stretch of the order is
//! sorted when it is reached (a selection, then a sort of the stretch, stretches doubling).

use crate::queue::QueueKey;

/// The first stretch sorted.
const FIRST: usize = 16;

pub(crate) struct Order {
    /// Taken up to `at`, sorted up to `sorted`, the rest in no order but all after.
    items: Vec<(QueueKey, u32)>,
    at: usize,
    sorted: usize,
    stretch: usize,
}

impl Order {
    /// `keys`: each queued job's key and queue index, in any order.
    pub(crate) fn new(items: Vec<(QueueKey, u32)>) -> Order {
        Order {
            items,
            at: 0,
            sorted: 0,
            stretch: FIRST,
        }
    }

    pub(crate) fn next(&mut self) -> Option<(QueueKey, u32)> {
        if self.at == self.sorted {
            let rest = &mut self.items[self.at..];
            if rest.is_empty() {
                return None;
            }
            let k = self.stretch.min(rest.len());
            if k < rest.len() {
                rest.select_nth_unstable(k - 1);
            }
            rest[..k].sort_unstable();
            self.sorted += k;
            self.stretch *= 2;
        }
        let item = self.items[self.at];
        self.at += 1;
        Some(item)
    }

    /// Keeps, of the jobs not yet taken, those `could_start` accepts (given queue indices); every
    /// later turn comes from them, still in order.
    pub(crate) fn narrow(&mut self, could_start: impl Fn(u32) -> bool) {
        let mut kept = self.at;
        let mut k = self.at;
        let mut sorted = self.at;
        while k < self.items.len() {
            if could_start(self.items[k].1) {
                self.items[kept] = self.items[k];
                kept += 1;
                if k < self.sorted {
                    sorted = kept;
                }
            }
            k += 1;
        }
        self.items.truncate(kept);
        self.sorted = sorted;
        self.stretch = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkloadId;
    use crate::snapshot::WorkloadSpec;

    fn key(i: u64, priority: u64) -> QueueKey {
        let w = WorkloadSpec {
            id: WorkloadId(i),
            leaf: crate::ids::BudgetId(1),
            gpus: 1,
            min_runtime: 60,
            resumable: true,
            priority: 0,
            submitted_at: (i % 7) as i64,
            time_limit: None,
        };
        QueueKey::slurm(&w, priority)
    }

    #[test]
    fn taking_lazily_and_narrowing_gives_the_sorted_order_of_what_is_kept() {
        let items: Vec<(QueueKey, u32)> = (0..500u32)
            .map(|i| (key(u64::from(i), u64::from(i * 7919 % 101)), i))
            .collect();
        let mut expected = items.clone();
        expected.sort_unstable();
        let mut order = Order::new(items);
        let mut got = Vec::new();
        for _ in 0..40 {
            got.push(order.next().unwrap());
        }
        order.narrow(|q| q % 3 != 0);
        while let Some(item) = order.next() {
            got.push(item);
        }
        let mut want: Vec<_> = expected[..40].to_vec();
        want.extend(expected[40..].iter().filter(|x| x.1 % 3 != 0));
        assert_eq!(got, want);
    }
}
