//! Fair share's queue kept between passes, for a driver that names what it changed
//! ([`Changes`]).
//!
//! Within a leaf, fair share orders waiting work by priority, then submit time, then id, and only
//! the leaves' ranks change from one pass to the next (DESIGN §4.4). So the lineup keeps each
//! leaf's waiting work in that order, allocated work, free work that can resume and free work that
//! cannot apart, and updates it from the queue entries the driver touched. A pass then reads
//! the leaves in rank order instead of bucketing and sorting the whole queue, and free work is
//! walked from its head instead of picked in batches from the whole queue. The order is the one
//! [`QueueKey::fair_share`] gives (the tests hold the decisions to those of a pass without it).

use std::collections::BTreeMap;

use crate::ids::{BudgetId, Time};
use crate::pool::FreeFit;
use crate::queue::leaf_order;
use crate::ranking::Standings;
use crate::shelf::Shelf;
use crate::snapshot::{Changes, WorkloadSpec};

/// What a pass reads of a waiting workload before its spec: the spec's own fields, a quarter of
/// its size, so that a long queue's settled work is told from a list that stays in cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Brief {
    pub gpus: u32,
    pub resumable: bool,
    pub debug: bool,
    pub min_runtime: Time,
}

impl Brief {
    pub(crate) fn of(w: &WorkloadSpec) -> Brief {
        Brief {
            gpus: w.gpus,
            resumable: w.resumable,
            debug: w.is_debug(),
            min_runtime: w.min_runtime,
        }
    }
}

/// What a walk of a leaf's allocated work reads to pass over work it knows waits, kept beside
/// the leaf's list so that the walk reads memory in order (see `decide::WaitFrom`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub gpus: u32,
    /// Debug work, which a walk always visits.
    pub debug: bool,
    /// Work larger than a host.
    pub gang: bool,
    /// Its minimum runtime if it can resume, else `Time::MAX`.
    pub resumable_min: Time,
}

impl Shape {
    pub(crate) fn of(w: &WorkloadSpec, node_size: u32) -> Shape {
        Shape {
            gpus: w.gpus,
            debug: w.is_debug(),
            gang: w.gpus > node_size,
            resumable_min: if w.resumable {
                w.min_runtime
            } else {
                Time::MAX
            },
        }
    }
}

/// Allocated work, free work that can resume, free work that cannot (the order of classes).
fn class(w: &WorkloadSpec) -> usize {
    match (w.is_allocated(), w.resumable) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 2,
    }
}

#[derive(Clone, Debug, Default)]
struct Leaf {
    /// By class, in order: queue indices (ordered by their workload's key in the mirror, then
    /// index; four bytes each, so that inserting and removing move little).
    lists: [Shelf<u32>; 3],
    /// Of its allocated work: the debug work, by queue index.
    debug: Vec<u32>,
    /// Of its allocated work: how many ask for each size, and how many of the resumable ones have
    /// each minimum runtime.
    sizes: BTreeMap<u32, u32>,
    resumable_min_runtimes: BTreeMap<Time, u32>,
    /// Of its allocated work: debug work and work larger than a host (see [`special`]), in the
    /// order of `lists[0]`.
    special: Shelf<u32>,
    /// The shapes of `lists[0]`, in its order.
    shapes: Shelf<Shape>,
}

/// Allocated work a walk of a leaf's work must still visit once the headroom holds back its
/// single-host requests: debug work (never held back) and work larger than a host.
pub(crate) fn special(w: &WorkloadSpec, node_size: u32) -> bool {
    w.is_allocated() && (w.is_debug() || w.gpus > node_size)
}

impl Leaf {
    /// Counts allocated workload `w` (at index `q`) in (`by` 1) or out (-1) of the summaries.
    fn count(&mut self, q: u32, w: &WorkloadSpec, by: i32) {
        if !w.is_allocated() {
            return;
        }
        tally(&mut self.sizes, w.gpus, by);
        if w.resumable {
            tally(&mut self.resumable_min_runtimes, w.min_runtime, by);
        }
        if w.is_debug() {
            match (self.debug.binary_search(&q), by > 0) {
                (Err(at), true) => self.debug.insert(at, q),
                (Ok(at), false) => {
                    self.debug.remove(at);
                }
                _ => {}
            }
        }
    }
}

fn tally<K: Ord + Copy>(counts: &mut BTreeMap<K, u32>, key: K, by: i32) {
    let n = counts.entry(key).or_insert(0);
    *n = n.wrapping_add_signed(by);
    if *n == 0 {
        counts.remove(&key);
    }
}

/// What a pass reads of a leaf's allocated work as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The fewest and most GPUs asked for (`u32::MAX` and 0 if none).
    pub min_gpus: u32,
    pub max_gpus: u32,
    /// The shortest minimum runtime of its resumable work (`Time::MAX` if none).
    pub shortest_resumable: Time,
}

#[derive(Debug, Default)]
pub(crate) struct Lineup {
    /// The driver's pass the lineup was brought up to.
    synced: Option<u64>,
    /// The queue as last seen.
    mirror: Vec<WorkloadSpec>,
    /// Its briefs, by queue index.
    briefs: Vec<Brief>,
    /// By leaf (budget node index).
    leaves: Vec<Leaf>,
    /// Scratch: the queue indices an update looks at.
    touched: Vec<u32>,
    /// The largest host's GPU count when the lineup was last updated.
    node_size: u32,
}

impl Lineup {
    /// Brings the lineup up to `queued`: from the entries `changes` names if it follows the last
    /// update, else from the whole queue.
    pub(crate) fn update(
        &mut self,
        queued: &[WorkloadSpec],
        changes: &Changes<'_>,
        nodes: usize,
        node_size: u32,
    ) {
        let follows = self
            .synced
            .is_some_and(|synced| changes.pass == synced.wrapping_add(1))
            && self.leaves.len() == nodes
            && self.node_size == node_size;
        self.synced = Some(changes.pass);
        self.node_size = node_size;
        if !follows {
            self.leaves = vec![Leaf::default(); nodes];
            self.mirror.clear();
            for (q, w) in queued.iter().enumerate() {
                self.add(q as u32, w);
            }
            self.mirror.extend_from_slice(queued);
            self.briefs = queued.iter().map(Brief::of).collect();
            for leaf in &mut self.leaves {
                for list in leaf.lists.iter_mut().chain([&mut leaf.special]) {
                    list.sort_unstable_by_key(|&q| (leaf_order(&queued[q as usize]), q));
                }
                leaf.shapes = leaf.lists[0]
                    .iter()
                    .map(|&q| Shape::of(&queued[q as usize], node_size))
                    .collect();
            }
            return;
        }
        let (old, new) = (self.mirror.len(), queued.len());
        let mut touched = std::mem::take(&mut self.touched);
        changes.queued_touched(old, new, &mut touched);
        for &q in &touched {
            let i = q as usize;
            if i < old && (i >= new || self.mirror[i] != queued[i]) {
                let w = self.mirror[i];
                self.remove(q, &w);
            }
        }
        self.mirror.truncate(new);
        self.briefs.truncate(new);
        for &q in &touched {
            let i = q as usize;
            if i >= new {
                break;
            }
            if i < self.mirror.len() {
                if self.mirror[i] == queued[i] {
                    continue;
                }
                self.mirror[i] = queued[i];
                self.briefs[i] = Brief::of(&queued[i]);
            } else {
                self.mirror.push(queued[i]);
                self.briefs.push(Brief::of(&queued[i]));
            }
            self.insert(q, &queued[i]);
        }
        self.touched = touched;
        debug_assert!(self.briefs.iter().copied().eq(queued.iter().map(Brief::of)));
        debug_assert!(self
            .leaves
            .iter()
            .all(|leaf| leaf.shapes.iter().copied().eq(leaf.lists[0]
                .iter()
                .map(|&q| Shape::of(&queued[q as usize], node_size)))));
    }

    fn add(&mut self, q: u32, w: &WorkloadSpec) {
        let leaf = &mut self.leaves[w.leaf.index()];
        leaf.lists[class(w)].push(q);
        if special(w, self.node_size) {
            leaf.special.push(q);
        }
        leaf.count(q, w, 1);
    }

    /// Lists `q`, whose entry in the mirror is `w` already.
    fn insert(&mut self, q: u32, w: &WorkloadSpec) {
        let mirror = &self.mirror;
        let leaf = &mut self.leaves[w.leaf.index()];
        let place = |list: &[u32]| {
            list.partition_point(|&e| (leaf_order(&mirror[e as usize]), e) < (leaf_order(w), q))
        };
        let list = &mut leaf.lists[class(w)];
        let at = place(list);
        list.insert(at, q);
        if class(w) == 0 {
            leaf.shapes.insert(at, Shape::of(w, self.node_size));
        }
        if special(w, self.node_size) {
            leaf.special.insert(place(&leaf.special), q);
        }
        leaf.count(q, w, 1);
    }

    /// Takes `q` off its list, while its entry in the mirror is still `w`.
    fn remove(&mut self, q: u32, w: &WorkloadSpec) {
        let mirror = &self.mirror;
        let leaf = &mut self.leaves[w.leaf.index()];
        let find = |list: &[u32]| {
            list.binary_search_by(|&e| {
                (leaf_order(&mirror[e as usize]), e).cmp(&(leaf_order(w), q))
            })
        };
        if special(w, self.node_size) {
            if let Ok(at) = find(&leaf.special) {
                leaf.special.remove(at);
            }
        }
        let list = &mut leaf.lists[class(w)];
        if let Ok(at) = find(list) {
            list.remove(at);
            if class(w) == 0 {
                leaf.shapes.remove(at);
            }
            leaf.count(q, w, -1);
        }
    }

    /// The allocated work of `leaf`, in queue order.
    pub(crate) fn allocated(&self, leaf: BudgetId) -> &[u32] {
        &self.leaves[leaf.index()].lists[0]
    }

    /// The shapes of `leaf`'s allocated work, in the order of [`Lineup::allocated`].
    pub(crate) fn shapes(&self, leaf: BudgetId) -> &[Shape] {
        &self.leaves[leaf.index()].shapes
    }

    /// `leaf`'s allocated debug work and work larger than a host, in queue order.
    pub(crate) fn special(&self, leaf: BudgetId) -> &[u32] {
        &self.leaves[leaf.index()].special
    }

    /// The queue's briefs, by queue index.
    pub(crate) fn briefs(&self) -> &[Brief] {
        &self.briefs
    }

    /// `leaf`'s allocated debug work, by queue index.
    pub(crate) fn debug(&self, leaf: BudgetId) -> &[u32] {
        &self.leaves[leaf.index()].debug
    }

    /// `leaf`'s allocated work as a whole.
    pub(crate) fn summary(&self, leaf: BudgetId) -> Summary {
        let leaf = &self.leaves[leaf.index()];
        Summary {
            min_gpus: leaf.sizes.keys().next().copied().unwrap_or(u32::MAX),
            max_gpus: leaf.sizes.keys().next_back().copied().unwrap_or(0),
            shortest_resumable: leaf
                .resumable_min_runtimes
                .keys()
                .next()
                .copied()
                .unwrap_or(Time::MAX),
        }
    }

    /// Free work from its head in queue order (see [`crate::queue::FreeQueue`]).
    pub(crate) fn free<'a>(
        &'a self,
        queued: &'a [WorkloadSpec],
        standings: &'a Standings,
    ) -> FreeWalk<'a> {
        FreeWalk {
            lineup: self,
            queued,
            standings,
            class: 1,
            rank: 0,
            at: 0,
        }
    }
}

/// A walk through free work in queue order: free work that can resume, then the rest, each by
/// leaf rank and then in the leaf's order.
pub(crate) struct FreeWalk<'a> {
    lineup: &'a Lineup,
    queued: &'a [WorkloadSpec],
    standings: &'a Standings,
    class: usize,
    rank: usize,
    at: usize,
}

impl FreeWalk<'_> {
    /// The next free workload in queue order that fits idle GPUs as they are now (`fits` may
    /// only have shrunk since the last call), and its leaf rank.
    pub(crate) fn next(&mut self, fits: FreeFit) -> Option<(u32, u32)> {
        let queued = self.queued;
        let leaves = self.standings.leaves();
        while self.class < 3 {
            if self.rank == leaves.len() {
                self.class += 1;
                self.rank = 0;
                self.at = 0;
                continue;
            }
            let list = &self.lineup.leaves[leaves[self.rank].index()].lists[self.class];
            while let Some(&q) = list.get(self.at) {
                self.at += 1;
                if fits.fits(&queued[q as usize]) {
                    return Some((q, self.rank as u32));
                }
            }
            self.rank += 1;
            self.at = 0;
        }
        None
    }
}
