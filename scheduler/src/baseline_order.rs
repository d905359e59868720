//! The priority baseline's queue order (priority, then age), taken lazily.
//!
//! Only two kinds of workload can start in a baseline pass: one whose leaf had room under its
//! cap when the pass began (it may start protected, preempting), and one that fits idle GPUs.
//! Protected room only shrinks during a pass, so the first kind is fixed at the start, and so is
//! whether it could gather its GPUs from idle and preemptible work of no higher priority: until
//! something is preempted (which may leave GPUs idle) nothing adds to that. The rest are kept by
//! size: while idle GPUs could not hold a size, its workloads are passed over unseen (they would
//! be turned away at their turn anyway), and a size is drawn from the queue a batch at a time,
//! since idle GPUs run out after a few starts. So a pass pays for the workloads that can act,
//! not for sorting a long queue that waits for GPUs; the decisions are exactly those of walking
//! the whole queue in order.

use std::collections::BinaryHeap;

use crate::baseline_book::BaselineBook;
use crate::pool::IdleFit;
use crate::snapshot::WorkloadSpec;

/// Which workloads a pass looks at, decided when it begins.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// At its turn: it may start protected, or it is the one being explained.
    Always,
    /// May start protected, but idle and preemptible GPUs it may take are too few: at its turn
    /// if idle GPUs could hold it, or always once something was preempted.
    UntilPreemption,
    /// At its turn if idle GPUs could hold it then.
    IfIdleFits,
    /// Asks for more GPUs than the pass could ever gather.
    Never,
}

pub(crate) struct LazyOrder<'a> {
    queued: &'a [WorkloadSpec],
    /// Taken at their turn, in queue order.
    first: Vec<(Key, u32)>,
    taken: usize,
    /// The fewest GPUs asked for by `first[i..]`.
    fewest_from: Vec<u32>,
    /// [`Turn::UntilPreemption`] work, until the first preemption moves it to `first` (read
    /// from the book's classes then, if the queue comes from the book).
    waiting: Vec<(Key, u32)>,
    /// Where the idle-only work is drawn from.
    source: Source<'a>,
    /// Every size asked for by idle-only work.
    by_size: Vec<SizeGroup>,
    /// Groups of an earlier pass, emptied, for `by_size` to reuse.
    spare: Vec<SizeGroup>,
    /// By GPUs asked for: its place in `by_size` plus one, or 0.
    size_index: Vec<u32>,
    /// The last key taken: idle-only work before it was passed over while it could not fit.
    last: Option<Key>,
    /// How many to draw at a time.
    batch: usize,
}

/// Where a pass reads idle-only work from.
enum Source<'a> {
    /// The queue as given.
    Scan {
        /// Each queued workload's turn: those taken only if idle GPUs could hold them are
        /// drawn from the queue a batch at a time by size.
        turns: Vec<Turn>,
        /// By queue index: moved to `first` by a preemption.
        moved: Vec<bool>,
    },
    /// The queue kept between passes, by class.
    Book {
        book: &'a BaselineBook,
        /// Each class's turn.
        turns: Vec<Turn>,
        /// Whether [`Turn::UntilPreemption`] classes were moved to `first` by a preemption.
        preempted: bool,
    },
}

/// A pass's buffers, which [`LazyOrder::into_buffers`] hands back for the next pass, so that a
/// pass does not allocate them anew.
#[derive(Default)]
pub(crate) struct OrderBuffers {
    first: Vec<(Key, u32)>,
    fewest_from: Vec<u32>,
    waiting: Vec<(Key, u32)>,
    turns: Vec<Turn>,
    by_size: Vec<SizeGroup>,
    size_index: Vec<u32>,
}

impl std::fmt::Debug for OrderBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderBuffers").finish_non_exhaustive()
    }
}

/// Idle-only work of one size, drawn from the queue in order a batch at a time.
#[derive(Default)]
struct SizeGroup {
    gpus: u32,
    /// The book's classes of this size with idle-only work (none when the queue is scanned).
    classes: Vec<u32>,
    batch: Vec<(Key, u32)>,
    at: usize,
    /// Nothing of this size is left after the batch.
    done: bool,
}

/// The fewest workloads drawn per batch.
const BATCH: usize = 16;

/// Baseline queue order packed for fast comparison: higher priority, then earlier submission
/// (both in the first word, order-preserving), then the workload id.
pub(crate) type Key = (u128, u64);

pub(crate) fn key(w: &WorkloadSpec) -> Key {
    const SIGN: u64 = 1 << 63;
    let priority = (-i64::from(w.priority)) as u64 ^ SIGN;
    let submitted = w.submitted_at as u64 ^ SIGN;
    ((u128::from(priority) << 64) | u128::from(submitted), w.id.0)
}

impl<'a> LazyOrder<'a> {
    pub(crate) fn new(
        queued: &'a [WorkloadSpec],
        buffers: OrderBuffers,
        mut turn: impl FnMut(&WorkloadSpec) -> Turn,
    ) -> Self {
        let (mut order, mut turns) = LazyOrder::empty(queued, buffers);
        for (q, w) in queued.iter().enumerate() {
            let t = turn(w);
            turns.push(t);
            match t {
                Turn::Always => order.first.push((key(w), q as u32)),
                Turn::UntilPreemption => {
                    order.waiting.push((key(w), q as u32));
                    order.add_size(w.gpus);
                }
                Turn::IfIdleFits => order.add_size(w.gpus),
                Turn::Never => {}
            }
        }
        order.source = Source::Scan {
            turns,
            moved: Vec::new(),
        };
        order.first.sort_unstable();
        order.count_fewest();
        order
    }

    /// As [`LazyOrder::new`] for the queue `book` keeps: `turn` is asked once per class, of its
    /// first workload (a turn depends only on what makes the class).
    pub(crate) fn from_book(
        queued: &'a [WorkloadSpec],
        book: &'a BaselineBook,
        buffers: OrderBuffers,
        mut turn: impl FnMut(&WorkloadSpec) -> Turn,
    ) -> Self {
        let (mut order, mut turns) = LazyOrder::empty(queued, buffers);
        for (c, class, q) in book.classes() {
            let t = turn(&queued[q as usize]);
            if turns.len() <= c as usize {
                turns.resize(c as usize + 1, Turn::Never);
            }
            turns[c as usize] = t;
            match t {
                Turn::Always => order.first.extend(class.after(None)),
                Turn::UntilPreemption | Turn::IfIdleFits => {
                    order.add_size(class.gpus);
                    let group = order.size_index[class.gpus as usize] as usize - 1;
                    order.by_size[group].classes.push(c);
                }
                Turn::Never => {}
            }
        }
        order.source = Source::Book {
            book,
            turns,
            preempted: false,
        };
        order.first.sort_unstable();
        order.count_fewest();
        order
    }

    /// Nothing taken yet, nothing to take, in `buffers` emptied; the caller fills it in and sets
    /// its source, with the turns (empty) returned.
    fn empty(queued: &'a [WorkloadSpec], buffers: OrderBuffers) -> (Self, Vec<Turn>) {
        let OrderBuffers {
            mut first,
            fewest_from,
            mut waiting,
            mut turns,
            by_size: spare,
            mut size_index,
        } = buffers;
        first.clear();
        waiting.clear();
        turns.clear();
        size_index.clear();
        let order = LazyOrder {
            queued,
            first,
            taken: 0,
            fewest_from,
            waiting,
            source: Source::Scan {
                turns: Vec::new(),
                moved: Vec::new(),
            },
            by_size: Vec::with_capacity(spare.len()),
            spare,
            size_index,
            last: None,
            batch: BATCH,
        };
        (order, turns)
    }

    /// Its buffers, for the next pass's order.
    pub(crate) fn into_buffers(self) -> OrderBuffers {
        let turns = match self.source {
            Source::Scan { turns, .. } | Source::Book { turns, .. } => turns,
        };
        let mut by_size = self.by_size;
        by_size.extend(self.spare);
        OrderBuffers {
            first: self.first,
            fewest_from: self.fewest_from,
            waiting: self.waiting,
            turns,
            by_size,
            size_index: self.size_index,
        }
    }

    fn count_fewest(&mut self) {
        self.fewest_from.clear();
        self.fewest_from.resize(self.first.len() + 1, u32::MAX);
        for i in (0..self.first.len()).rev() {
            let gpus = self.queued[self.first[i].1 as usize].gpus;
            self.fewest_from[i] = self.fewest_from[i + 1].min(gpus);
        }
    }

    /// Whether no workload still to be taken at its turn could gather its GPUs from preemptible
    /// work, given what work of each priority could preempt (`reach`). The rest come in
    /// priority order, so none may preempt more than the next one.
    pub(crate) fn none_could_gather(&self, reach: impl Fn(i32) -> u32) -> bool {
        match self.first.get(self.taken) {
            None => true,
            Some(&(_, q)) => self.fewest_from[self.taken] > reach(self.queued[q as usize].priority),
        }
    }

    fn add_size(&mut self, gpus: u32) {
        if self.size_index.len() <= gpus as usize {
            self.size_index.resize(gpus as usize + 1, 0);
        }
        if self.size_index[gpus as usize] == 0 {
            self.size_index[gpus as usize] = self.by_size.len() as u32 + 1;
            let mut group = self.spare.pop().unwrap_or_default();
            group.gpus = gpus;
            group.classes.clear();
            group.batch.clear();
            group.at = 0;
            group.done = false;
            self.by_size.push(group);
        }
    }

    /// Something was preempted: [`Turn::UntilPreemption`] work not yet passed is taken at its
    /// turn from now on (and no longer drawn as idle-only work).
    pub(crate) fn preempted(&mut self) {
        if let Source::Book {
            book,
            turns,
            preempted,
        } = &mut self.source
        {
            if *preempted {
                return;
            }
            *preempted = true;
            for (c, class, _) in book.classes() {
                if turns.get(c as usize) == Some(&Turn::UntilPreemption) {
                    self.waiting.extend(class.after(self.last));
                }
            }
        }
        if self.waiting.is_empty() {
            return;
        }
        let last = self.last;
        let mut waiting = std::mem::take(&mut self.waiting);
        waiting.retain(|(k, _)| last.is_none_or(|l| *k > l));
        waiting.sort_unstable();
        let mut merged = Vec::with_capacity(self.first.len() - self.taken + waiting.len());
        let (mut a, mut b) = (self.first[self.taken..].iter().peekable(), waiting.iter());
        let mut next_b = b.next();
        while let Some(&x) = a.peek() {
            match next_b {
                Some(y) if y < x => {
                    merged.push(*y);
                    next_b = b.next();
                }
                _ => {
                    merged.push(*x);
                    a.next();
                }
            }
        }
        merged.extend(next_b.into_iter().chain(b).copied());
        self.first = merged;
        self.taken = 0;
        self.count_fewest();
        // Idle-only draws pass over them from now on.
        if let Source::Scan { moved, .. } = &mut self.source {
            *moved = vec![false; self.queued.len()];
            for w in &waiting {
                moved[w.1 as usize] = true;
            }
        }
    }

    fn is_moved(&self, q: u32) -> bool {
        match &self.source {
            Source::Scan { moved, .. } => moved.get(q as usize).copied().unwrap_or(false),
            Source::Book {
                book,
                turns,
                preempted,
            } => *preempted && turns[book.class_of(q) as usize] == Turn::UntilPreemption,
        }
    }

    /// The next workload in queue order that may act, given what idle GPUs could hold now.
    pub(crate) fn next(&mut self, fit: IdleFit) -> Option<u32> {
        // Enough per draw for the idle GPUs on the biggest host, so one draw usually does.
        self.batch = (fit.max_idle as usize).clamp(BATCH, 4 * BATCH);
        // The group whose head comes first: `None` is `first`.
        let mut best: Option<usize> = None;
        let mut best_key = self.first.get(self.taken).map(|(k, _)| *k);
        for i in 0..self.by_size.len() {
            if !fit.fits(self.by_size[i].gpus) {
                continue;
            }
            if let Some(k) = self.head(i) {
                if best_key.is_none_or(|b| k < b) {
                    best = Some(i);
                    best_key = Some(k);
                }
            }
        }
        let (key, q) = match best {
            Some(i) => {
                let group = &mut self.by_size[i];
                group.at += 1;
                group.batch[group.at - 1]
            }
            None => {
                let item = *self.first.get(self.taken)?;
                self.taken += 1;
                item
            }
        };
        self.last = Some(key);
        Some(q)
    }

    /// The first key of group `i` not yet passed, drawing a new batch when needed.
    fn head(&mut self, i: usize) -> Option<Key> {
        let last = self.last;
        loop {
            // Skip work passed over while this size could not fit, and work moved to `first`.
            while let Some(&(k, q)) = self.by_size[i].batch.get(self.by_size[i].at) {
                if last.is_some_and(|l| k < l) || self.is_moved(q) {
                    self.by_size[i].at += 1;
                } else {
                    break;
                }
            }
            let group = &mut self.by_size[i];
            if let Some((k, _)) = group.batch.get(group.at) {
                return Some(*k);
            }
            if group.done {
                return None;
            }
            let after = match (group.batch.last().map(|b| b.0), last) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            let gpus = group.gpus;
            let (batch, done) = match &self.source {
                Source::Scan { turns, .. } => self.pick(turns, gpus, after),
                Source::Book {
                    book,
                    turns,
                    preempted,
                } => self.pick_from_book(book, turns, *preempted, i, after),
            };
            let group = &mut self.by_size[i];
            group.batch = batch;
            group.at = 0;
            group.done = done;
        }
    }

    /// The first `batch` idle-only workloads of `gpus` GPUs after key `after`, in order, and
    /// whether they were all that is left.
    fn pick(&self, turns: &[Turn], gpus: u32, after: Option<Key>) -> (Vec<(Key, u32)>, bool) {
        let mut heap: BinaryHeap<(Key, u32)> = BinaryHeap::with_capacity(self.batch);
        let mut more = false;
        for (q, (w, t)) in self.queued.iter().zip(turns).enumerate() {
            let q = q as u32;
            let idle_only = matches!(t, Turn::IfIdleFits | Turn::UntilPreemption);
            if w.gpus != gpus || !idle_only || self.is_moved(q) {
                continue;
            }
            let k = key(w);
            if after.is_some_and(|a| k <= a) {
                continue;
            }
            if heap.len() < self.batch {
                heap.push((k, q));
            } else {
                more = true;
                if let Some(mut top) = heap.peek_mut().filter(|top| k < top.0) {
                    *top = (k, q);
                }
            }
        }
        (heap.into_sorted_vec(), !more)
    }

    /// [`LazyOrder::pick`] from the book: the first `batch` after `after` of each of group `i`'s
    /// classes still drawn from, merged.
    fn pick_from_book(
        &self,
        book: &BaselineBook,
        turns: &[Turn],
        preempted: bool,
        i: usize,
        after: Option<Key>,
    ) -> (Vec<(Key, u32)>, bool) {
        let mut picked = Vec::new();
        for &c in &self.by_size[i].classes {
            if preempted && turns[c as usize] == Turn::UntilPreemption {
                continue;
            }
            picked.extend(book.class(c).after(after).take(self.batch + 1));
        }
        picked.sort_unstable();
        let more = picked.len() > self.batch;
        picked.truncate(self.batch);
        (picked, !more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{BudgetId, WorkloadId};
    use crate::sim::rng::Rng;
    use crate::snapshot::Changes;

    /// The order the lazy walk must reproduce: every workload in queue order, each looked at
    /// under the idle GPUs and preemptions of that moment.
    fn visits(
        queued: &[WorkloadSpec],
        turns: &[Turn],
        mut at_each: impl FnMut(&mut IdleFit, &mut bool),
    ) -> Vec<u32> {
        let mut order: Vec<u32> = (0..queued.len() as u32)
            .filter(|&q| turns[q as usize] != Turn::Never)
            .collect();
        order.sort_by_key(|&q| key(&queued[q as usize]));
        let (mut fit, mut preempted) = (start_fit(), false);
        let mut out = Vec::new();
        for q in order {
            let fits = fit.fits(queued[q as usize].gpus);
            let looked_at = match turns[q as usize] {
                Turn::Always => true,
                Turn::UntilPreemption => preempted || fits,
                Turn::IfIdleFits => fits,
                Turn::Never => false,
            };
            if looked_at {
                out.push(q);
                at_each(&mut fit, &mut preempted);
            }
        }
        out
    }

    fn start_fit() -> IdleFit {
        IdleFit {
            node_size: 8,
            max_idle: 2,
            whole_idle: 0,
        }
    }

    #[test]
    fn the_lazy_walk_looks_at_the_same_workloads_in_the_same_order_as_walking_the_whole_queue() {
        for case in 0..3000u64 {
            check(case, false);
        }
    }

    #[test]
    fn the_lazy_walk_on_the_kept_book_looks_at_the_same_workloads_as_walking_the_whole_queue() {
        for case in 0..3000u64 {
            check(case, true);
        }
    }

    /// One random queue walked lazily (from the queue as given, or from the book, where a turn
    /// depends only on a workload's class) and whole.
    fn check(case: u64, by_class: bool) {
        let mut rng = Rng::new(case);
        let n = rng.range(0, 60) as usize;
        let queued: Vec<WorkloadSpec> = (0..n)
            .map(|i| WorkloadSpec {
                id: WorkloadId(rng.range(0, 1_000_000) as u64 * 64 + i as u64),
                leaf: BudgetId(rng.range(1, 3) as u32),
                gpus: [1, 1, 2, 4, 8, 16, 24][rng.range(0, 6) as usize],
                min_runtime: [0, 600][rng.range(0, 1) as usize],
                resumable: true,
                priority: rng.range(-1, 2) as i32,
                submitted_at: rng.range(0, 20),
                time_limit: None,
            })
            .collect();
        let options = [
            Turn::Always,
            Turn::UntilPreemption,
            Turn::IfIdleFits,
            Turn::IfIdleFits,
            Turn::Never,
        ];
        let by_class_table: Vec<Turn> =
            (0..64).map(|_| options[rng.range(0, 4) as usize]).collect();
        let of_class = |w: &WorkloadSpec| {
            let class = ((u64::from(w.leaf.0) * 31 + u64::from(w.gpus)) * 7
                + (w.priority + 1) as u64 * 2
                + u64::from(w.is_allocated()))
                % 64;
            by_class_table[class as usize]
        };
        let turns: Vec<Turn> = if by_class {
            queued.iter().map(of_class).collect()
        } else {
            (0..n).map(|_| options[rng.range(0, 4) as usize]).collect()
        };
        // After each look the idle GPUs change at random (mostly shrinking, sometimes
        // growing) and now and then something is preempted: the same draws for both walks.
        let seed = rng.next_u64();
        let change = |rng: &mut Rng, fit: &mut IdleFit, preempted: &mut bool| {
            fit.max_idle = match rng.range(0, 9) {
                0..=4 => fit.max_idle.saturating_sub(1),
                5..=6 => fit.max_idle,
                _ => (fit.max_idle + rng.range(1, 8) as u32).min(8),
            };
            fit.whole_idle = [0, 0, 8, 16, 24][rng.range(0, 4) as usize];
            if rng.chance(0.1) {
                *preempted = true;
            }
        };
        let mut draws = Rng::new(seed);
        let expected = visits(&queued, &turns, |fit, p| change(&mut draws, fit, p));

        let mut draws = Rng::new(seed);
        let mut book = BaselineBook::default();
        if by_class {
            let changes = Changes {
                pass: 0,
                running: &[],
                queued: &[],
            };
            book.follow(&queued, &changes);
        }
        // Buffers an earlier walk left behind, with its work in them: the walk must read none.
        let buffers = {
            let earlier_turn = |w: &WorkloadSpec| match w.gpus % 3 {
                0 => Turn::Always,
                1 => Turn::UntilPreemption,
                _ => Turn::IfIdleFits,
            };
            let mut earlier = if by_class {
                LazyOrder::from_book(&queued, &book, OrderBuffers::default(), earlier_turn)
            } else {
                LazyOrder::new(&queued, OrderBuffers::default(), earlier_turn)
            };
            for _ in 0..3 {
                earlier.next(start_fit());
            }
            earlier.into_buffers()
        };
        let mut order = if by_class {
            LazyOrder::from_book(&queued, &book, buffers, of_class)
        } else {
            LazyOrder::new(&queued, buffers, |w| {
                let q = queued.iter().position(|x| x.id == w.id).expect("queued");
                turns[q]
            })
        };
        let (mut fit, mut preempted) = (start_fit(), false);
        let mut got = Vec::new();
        while let Some(q) = order.next(fit) {
            got.push(q);
            let was = preempted;
            change(&mut draws, &mut fit, &mut preempted);
            if preempted && !was {
                order.preempted();
            }
        }
        assert_eq!(got, expected, "case {case}, by class: {by_class}");
    }
}
