//! The SLURM peer's queue, taken in priority order lazily. A pass needs the head of the queue
//! until the first job that cannot start (it gets the reservation), and after that only the jobs
//! that could still start by backfilling, of which the first few usually take every GPU they can.
//! So the head is found in one streaming pass over the queue; the others' keys are made only if
//! the head started (every job then has its turn) or for the jobs that could still backfill; and
//! each stretch of the order is sorted when it is reached (a selection, then a sort, stretches
//! doubling). Sorting the whole queue at every event cost most of a run.

use crate::queue::QueueKey;

/// The first stretch sorted.
const FIRST: usize = 16;

pub(crate) struct Order<K: Fn(u32) -> QueueKey> {
    key: K,
    len: u32,
    /// Before the rest's keys are made: the head, and whether it was taken.
    head: Option<(QueueKey, u32)>,
    head_taken: bool,
    /// Once made: taken up to `at`, sorted up to `sorted`, the rest in no order but all after.
    items: Option<Vec<(QueueKey, u32)>>,
    at: usize,
    sorted: usize,
    stretch: usize,
}

impl<K: Fn(u32) -> QueueKey> Order<K> {
    /// The queue of `len` jobs, `key` giving each one's key by queue index.
    pub(crate) fn new(len: usize, key: K) -> Self {
        let head = (0..len as u32).map(|q| (key(q), q)).min();
        Order {
            key,
            len: len as u32,
            head,
            head_taken: false,
            items: None,
            at: 0,
            sorted: 0,
            stretch: FIRST,
        }
    }

    pub(crate) fn next(&mut self) -> Option<(QueueKey, u32)> {
        if self.items.is_none() {
            if !self.head_taken {
                self.head_taken = true;
                return self.head;
            }
            let skip = self.head.map(|h| h.1);
            let key = &self.key;
            self.items = Some(
                (0..self.len)
                    .filter(|&q| Some(q) != skip)
                    .map(|q| (key(q), q))
                    .collect(),
            );
        }
        let items = self.items.as_mut().expect("made above");
        if self.at == self.sorted {
            let rest = &mut items[self.at..];
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
        let item = items[self.at];
        self.at += 1;
        Some(item)
    }

    /// Keeps, of the jobs not yet taken, those `could_start` accepts (given queue indices); every
    /// later turn comes from them, still in order. Keys are made for those kept alone.
    pub(crate) fn narrow(&mut self, could_start: impl Fn(u32) -> bool) {
        match &mut self.items {
            None => {
                let skip = self.head.filter(|_| self.head_taken).map(|h| h.1);
                let key = &self.key;
                let kept: Vec<(QueueKey, u32)> = (0..self.len)
                    .filter(|&q| Some(q) != skip && could_start(q))
                    .map(|q| (key(q), q))
                    .collect();
                self.items = Some(kept);
                self.at = 0;
                self.sorted = 0;
            }
            Some(items) => {
                let mut kept = self.at;
                let mut sorted = self.at;
                for k in self.at..items.len() {
                    if could_start(items[k].1) {
                        items[kept] = items[k];
                        kept += 1;
                        if k < self.sorted {
                            sorted = kept;
                        }
                    }
                }
                items.truncate(kept);
                self.sorted = sorted;
            }
        }
        self.stretch = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkloadId;
    use crate::snapshot::WorkloadSpec;

    fn key(i: u32) -> QueueKey {
        let w = WorkloadSpec {
            id: WorkloadId(u64::from(i)),
            leaf: crate::ids::BudgetId(1),
            gpus: 1,
            min_runtime: 60,
            resumable: true,
            priority: 0,
            submitted_at: i64::from(i % 7),
            time_limit: None,
        };
        QueueKey::slurm(&w, u64::from(i * 7919 % 101))
    }

    fn sorted() -> Vec<(QueueKey, u32)> {
        let mut all: Vec<(QueueKey, u32)> = (0..500).map(|i| (key(i), i)).collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn taking_lazily_and_narrowing_gives_the_sorted_order_of_what_is_kept() {
        let expected = sorted();
        let mut order = Order::new(500, key);
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

    #[test]
    fn narrowing_after_the_head_alone_makes_keys_for_the_kept_jobs_in_order() {
        let expected = sorted();
        let mut order = Order::new(500, key);
        let mut got = vec![order.next().unwrap()];
        order.narrow(|q| q % 5 == 1);
        while let Some(item) = order.next() {
            got.push(item);
        }
        let mut want = vec![expected[0]];
        want.extend(expected[1..].iter().filter(|x| x.1 % 5 == 1));
        assert_eq!(got, want);
    }

    #[test]
    fn an_empty_queue_has_no_turns() {
        let mut order = Order::new(0, key);
        assert_eq!(order.next(), None);
    }
}
