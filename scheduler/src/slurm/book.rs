//! The priorities as the SLURM peer last calculated them, and the queue in their order, kept
//! between passes.
//!
//! SLURM recalculates every pending job's priority once per `PriorityCalcPeriod` (5 minutes by
//! default: <https://slurm.schedmd.com/slurm.conf.html#OPT_PriorityCalcPeriod>, "the period of
//! time in minutes in which the half-life decay will be re-calculated") and gives a job submitted
//! in between its priority at submission, with the fair-share factors of the last calculation and
//! an age of zero. So between calculations the order of the jobs already queued does not change.
//! The book keeps that order: a pass costs a lookup per queued job (to learn which are still
//! queued, and which are new) instead of a priority and a sort, and walks the order from its head.
//! Priorities are recalculated at the first pass of each period (the period counted from time 0)
//! and whenever the tree or the cluster's size changed; a period of 0 recalculates at every pass.
//!
//! What the book holds changes how fast a pass is, never its order: the order is the one the
//! priorities of the last calculation give (tested against sorting them afresh).

use std::collections::{BTreeMap, HashMap};

use crate::engine::Engine;
use crate::ids::{BudgetId, Time, WorkloadId};
use crate::queue::QueueKey;
use crate::snapshot::{Changes, WorkloadSpec, DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};

use super::classes::{Class, ClassCursor, Classes, Member};
use super::priority::Priorities;

/// Ids below this are looked up in a vector, others in a map.
const DENSE: u64 = 1 << 22;
const NONE: u32 = u32::MAX;

/// What the order reads of a queued job: its id and what its priority depends on. The rest of
/// its spec (resumable, time limit, user priority) is read from the queue when it is walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    pub id: WorkloadId,
    pub submitted_at: Time,
    pub min_runtime: Time,
    pub leaf: BudgetId,
    pub gpus: u32,
}

impl Job {
    fn of(w: &WorkloadSpec) -> Job {
        Job {
            id: w.id,
            submitted_at: w.submitted_at,
            min_runtime: w.min_runtime,
            leaf: w.leaf,
            gpus: w.gpus,
        }
    }

    /// Whether `w` is this job, as far as its place in the order goes (one comparison, no
    /// branches: the queue is compared in full at every pass).
    fn is(&self, w: &WorkloadSpec) -> bool {
        ((self.id.0 ^ w.id.0)
            | (self.submitted_at ^ w.submitted_at) as u64
            | (self.min_runtime ^ w.min_runtime) as u64
            | u64::from(self.leaf.0 ^ w.leaf.0)
            | u64::from(self.gpus ^ w.gpus))
            == 0
    }

    pub(crate) fn is_scavenger(&self) -> bool {
        self.min_runtime <= 0
    }

    pub(crate) fn is_debug(&self) -> bool {
        self.min_runtime > 0
            && self.min_runtime <= DEBUG_MAX_MIN_RUNTIME
            && self.gpus <= DEBUG_MAX_GPUS
    }

    fn key(&self, priorities: &Priorities) -> QueueKey {
        QueueKey::slurm(self.id, self.submitted_at, priorities.of(self))
    }
}

/// The queue in order, normal and debug jobs in one lane, scavenger work in the other, kept by
/// class (see [`super::classes`]; a pass skips scavenger work in bulk while no GPUs are idle for
/// it).
#[derive(Clone, Default)]
pub struct Book {
    calc: Option<Calc>,
    normal: Lane,
    scavenger: Classes,
    slots: Vec<Slot>,
    dense: Vec<u32>,
    sparse: HashMap<WorkloadId, u32>,
    /// The queue at the last update, as given: a job is queued if its slot's index holds it.
    queue: Vec<Job>,
    /// The smallest request queued now, of any job and of scavenger work (0 if none).
    smallest: u32,
    smallest_scavenger: u32,
    /// The driver's pass the queue was last brought up to ([`Changes`]), if it names its changes.
    synced: Option<u64>,
    /// How many queued jobs ask for each size, of any job and of scavenger work: kept while the
    /// driver names its changes (`None` until needed).
    sizes: Option<[BTreeMap<u32, u32>; 2]>,
}

#[derive(Clone, Default)]
struct Lane {
    /// Sorted by key at the last calculation; some no longer queued.
    sorted: Vec<Entry>,
    /// Queued since the last calculation, sorted; some no longer queued.
    fresh: Vec<Entry>,
}

/// The normal lane and the scavenger lane, as a cursor reads them.
const NORMAL: usize = 0;
const SCAVENGER: usize = 1;

#[derive(Clone)]
struct Calc {
    at: Time,
    period: Time,
    tree_len: usize,
    cluster_gpus: u32,
    priorities: Priorities,
}

#[derive(Clone, Copy)]
struct Entry {
    key: QueueKey,
    slot: u32,
    generation: u32,
}

#[derive(Clone)]
struct Slot {
    job: Job,
    generation: u32,
    /// Its index in the queue when last seen there.
    q: u32,
    /// Whether an entry of this generation is in a lane (a recalculation drops those of jobs
    /// not queued then; one coming back needs a new entry).
    listed: bool,
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Book")
            .field("calculated_at", &self.calc.as_ref().map(|c| c.at))
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// The queue index of the job an entry of `slot` and `generation` is for, if it is still queued
/// there: the slot holds that generation and the queue that job at the slot's index.
fn queued_in(slots: &[Slot], queue: &[Job], slot: u32, generation: u32) -> Option<u32> {
    let slot = &slots[slot as usize];
    (slot.generation == generation
        && queue
            .get(slot.q as usize)
            .is_some_and(|j| j.id == slot.job.id))
    .then_some(slot.q)
}

/// Counts `job` in (`by` 1) or out (-1) of the sizes asked for.
fn count(sizes: &mut [BTreeMap<u32, u32>; 2], job: &Job, by: i32) {
    let lanes: &mut [BTreeMap<u32, u32>] = if job.is_scavenger() {
        &mut sizes[..]
    } else {
        &mut sizes[..1]
    };
    for map in lanes {
        let n = map.entry(job.gpus).or_insert(0);
        *n = n.wrapping_add_signed(by);
        if *n == 0 {
            map.remove(&job.gpus);
        }
    }
}

impl Book {
    /// Brings the book up to the queue `queued` at `now`, recalculating if a period began. Only
    /// the places in the queue that changed since the last update are looked at closely; with
    /// `changes` that follow the last update's, only the places they name are looked at.
    pub(crate) fn update(
        &mut self,
        engine: &Engine,
        queued: &[WorkloadSpec],
        now: Time,
        cluster_gpus: u32,
        changes: Option<&Changes<'_>>,
    ) {
        let config = &engine.config().slurm;
        let tree_len = engine.tree().len();
        let due = match &self.calc {
            None => true,
            Some(c) => {
                c.period != config.calc_period
                    || c.tree_len != tree_len
                    || c.cluster_gpus != cluster_gpus
                    || now < c.at
                    || config.calc_period == 0
                    || now.div_euclid(config.calc_period) != c.at.div_euclid(config.calc_period)
            }
        };
        if due {
            self.calc = Some(Calc {
                at: now,
                period: config.calc_period,
                tree_len,
                cluster_gpus,
                priorities: Priorities::new(engine, now, cluster_gpus, config),
            });
        }
        self.follow(queued, changes, due);
    }

    /// Brings the queue up to date without recalculating, for a pass that starts nothing but
    /// must keep pace with a driver that names its changes. Jobs new to the book get their
    /// priority at submission, as they would at the next update within the period; one that
    /// recalculates keys every job again anyway.
    pub(crate) fn follow_only(&mut self, queued: &[WorkloadSpec], changes: &Changes<'_>) {
        if self.calc.is_none() {
            self.synced = None;
            return;
        }
        self.follow(queued, Some(changes), false);
    }

    /// The queue part of [`Book::update`], then the recalculation if `due`.
    fn follow(&mut self, queued: &[WorkloadSpec], changes: Option<&Changes<'_>>, due: bool) {
        let mut added = false;
        let follows = changes.filter(|c| {
            self.synced
                .is_some_and(|synced| c.pass == synced.wrapping_add(1))
        });
        self.synced = changes.map(|c| c.pass);
        if let Some(changes) = follows {
            let (old, new) = (self.queue.len(), queued.len());
            let mut sizes = self.sizes.take().unwrap_or_else(|| self.count_sizes());
            for q in new.min(old)..old {
                let job = self.queue[q];
                count(&mut sizes, &job, -1);
                self.leave(q, job);
            }
            self.queue.truncate(new);
            // Entries past the new length were counted out above.
            let mut touched = Vec::new();
            changes.queued_touched(old, new, &mut touched);
            for q in touched.into_iter().take_while(|&q| (q as usize) < new) {
                let (q, w) = (q as usize, &queued[q as usize]);
                if let Some(&j) = self.queue.get(q) {
                    if j.is(w) {
                        continue;
                    }
                    count(&mut sizes, &j, -1);
                    self.leave(q, j);
                }
                count(&mut sizes, &Job::of(w), 1);
                self.take(q, w, &mut added);
            }
            let least = |m: &BTreeMap<u32, u32>| m.keys().next().copied().unwrap_or(0);
            self.smallest = least(&sizes[0]);
            self.smallest_scavenger = least(&sizes[1]);
            self.sizes = Some(sizes);
        } else {
            self.sizes = None;
            let (mut smallest, mut smallest_scavenger) = (u32::MAX, u32::MAX);
            self.queue.truncate(queued.len());
            for (q, w) in queued.iter().enumerate() {
                smallest = smallest.min(w.gpus);
                // Without a branch: allocated work counts as u32::MAX.
                smallest_scavenger =
                    smallest_scavenger.min(w.gpus | u32::from(w.min_runtime > 0).wrapping_neg());
                if self.queue.get(q).is_some_and(|j| j.is(w)) {
                    continue;
                }
                self.take(q, w, &mut added);
            }
            self.prune_scavengers();
            self.smallest = if smallest == u32::MAX { 0 } else { smallest };
            self.smallest_scavenger = if smallest_scavenger == u32::MAX {
                0
            } else {
                smallest_scavenger
            };
        }
        if due {
            self.recalculate();
            return;
        }
        if added {
            // A few new entries after sorted ones: the stable sort merges them.
            self.normal.fresh.sort_by_key(|e| e.key);
        }
    }

    /// Takes `w`, at queue index `q`, whose entry there changed.
    fn take(&mut self, q: usize, w: &WorkloadSpec, added: &mut bool) {
        let job = Job::of(w);
        if q < self.queue.len() {
            self.queue[q] = job;
        } else {
            self.queue.push(job);
        }
        let found = self.lookup(w.id);
        if found != NONE {
            let slot = &mut self.slots[found as usize];
            if slot.job.is(w) && slot.listed {
                slot.q = q as u32;
                return;
            }
            // The same id asking for something else: its old class entry goes.
            let (old, generation) = (slot.job, slot.generation);
            if old.is_scavenger() && slot.listed {
                self.scavenger.remove(&old, generation);
            }
        }
        let slot = self.place(job, found, q as u32);
        let generation = self.slots[slot as usize].generation;
        if job.is_scavenger() {
            let member = Member {
                submitted_at: job.submitted_at,
                id: job.id,
                slot,
                generation,
            };
            self.scavenger.insert(job.leaf, job.gpus, member);
            return;
        }
        *added = true;
        self.normal.fresh.push(Entry {
            key: job.key(self.priorities()),
            slot,
            generation,
        });
    }

    /// The job that was at queue index `q` is there no longer: if it was scavenger work and is not
    /// queued elsewhere now, its class entry goes (one that comes back gets a new one).
    fn leave(&mut self, q: usize, job: Job) {
        if !job.is_scavenger() {
            return;
        }
        let found = self.lookup(job.id);
        if found == NONE {
            return;
        }
        let slot = &mut self.slots[found as usize];
        if slot.q as usize == q && slot.job == job && slot.listed {
            slot.listed = false;
            let generation = slot.generation;
            self.scavenger.remove(&job, generation);
        }
    }

    /// Drops the class entries of scavenger work no longer queued (after the queue was compared
    /// whole, which does not say what left).
    fn prune_scavengers(&mut self) {
        let (slots, queue) = (&mut self.slots, &self.queue);
        self.scavenger.retain(|m| {
            let queued = queued_in(slots, queue, m.slot, m.generation).is_some();
            let slot = &mut slots[m.slot as usize];
            if !queued && slot.generation == m.generation {
                slot.listed = false;
            }
            queued.then_some((m.slot, m.generation))
        });
    }

    /// The sizes asked for by the queue as last seen.
    fn count_sizes(&self) -> [BTreeMap<u32, u32>; 2] {
        let mut sizes = [BTreeMap::new(), BTreeMap::new()];
        for job in &self.queue {
            count(&mut sizes, job, 1);
        }
        sizes
    }

    fn priorities(&self) -> &Priorities {
        &self.calc.as_ref().expect("calculated").priorities
    }

    /// New priorities for every queued normal and debug job: their lane is rebuilt in its old
    /// order and sorted stably (priorities move little in a period, so the sort finds long runs
    /// already in order). Scavenger work's classes keep their order whatever the priorities.
    /// Slots of jobs gone are dropped once they outnumber the queued ones.
    fn recalculate(&mut self) {
        if self.slots.len() > 2 * self.queue.len() + 1024 {
            self.compact();
        }
        let mut listed = Vec::new();
        let mut cursor = LaneCursor::default();
        let lane = &self.normal;
        let mut sorted = Vec::with_capacity(lane.sorted.len() + lane.fresh.len());
        while let Some((_, _, slot)) = cursor.next(self, lane, &|_| true) {
            listed.push(slot);
            let s = &self.slots[slot as usize];
            sorted.push(Entry {
                key: s.job.key(self.priorities()),
                slot,
                generation: s.generation,
            });
        }
        sorted.sort_by_key(|e| e.key);
        self.normal.sorted = sorted;
        self.normal.fresh.clear();
        // A normal job's entry is dropped when it is not queued at a calculation; scavenger work
        // keeps its entry in its class.
        self.slots
            .iter_mut()
            .filter(|s| !s.job.is_scavenger())
            .for_each(|s| s.listed = false);
        for slot in listed {
            self.slots[slot as usize].listed = true;
        }
    }

    /// Keeps the slots of queued jobs only, and their entries.
    fn compact(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        for s in &slots {
            self.forget(s.job.id);
        }
        let queue = &self.queue;
        let alive = |slot, generation| queued_in(&slots, queue, slot, generation).is_some();
        let mut kept: Vec<u32> = Vec::new();
        let mut renumber = |slot: u32| {
            kept.push(slot);
            (kept.len() - 1) as u32
        };
        let mut normal = Lane::default();
        for (from, to) in [
            (&self.normal.sorted, &mut normal.sorted),
            (&self.normal.fresh, &mut normal.fresh),
        ] {
            for e in from.iter().filter(|e| alive(e.slot, e.generation)) {
                to.push(Entry {
                    slot: renumber(e.slot),
                    generation: 0,
                    ..*e
                });
            }
        }
        self.scavenger
            .retain(|m| alive(m.slot, m.generation).then(|| (renumber(m.slot), 0)));
        self.normal = normal;
        for old in kept {
            let old = &slots[old as usize];
            let slot = self.slots.len() as u32;
            self.slots.push(Slot {
                job: old.job,
                generation: 0,
                q: old.q,
                listed: true,
            });
            self.remember(old.job.id, slot);
        }
    }

    fn lookup(&self, id: WorkloadId) -> u32 {
        if id.0 < DENSE {
            self.dense.get(id.0 as usize).copied().unwrap_or(NONE)
        } else {
            self.sparse.get(&id).copied().unwrap_or(NONE)
        }
    }

    fn remember(&mut self, id: WorkloadId, slot: u32) {
        if id.0 < DENSE {
            let i = id.0 as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, NONE);
            }
            self.dense[i] = slot;
        } else {
            self.sparse.insert(id, slot);
        }
    }

    fn forget(&mut self, id: WorkloadId) {
        if id.0 < DENSE {
            if let Some(s) = self.dense.get_mut(id.0 as usize) {
                *s = NONE;
            }
        } else {
            self.sparse.remove(&id);
        }
    }

    /// A slot for `w`, at `q`: its old one (`found`) under a new generation, or a new one.
    fn place(&mut self, job: Job, found: u32, q: u32) -> u32 {
        if found != NONE {
            let slot = &mut self.slots[found as usize];
            slot.job = job;
            slot.generation += 1;
            slot.q = q;
            slot.listed = true;
            return found;
        }
        let slot = self.slots.len() as u32;
        self.slots.push(Slot {
            job,
            generation: 0,
            q,
            listed: true,
        });
        self.remember(job.id, slot);
        slot
    }

    fn queued_index(&self, e: &Entry) -> Option<u32> {
        self.queued_in(e.slot, e.generation)
    }

    /// The queue index of the job an entry of `slot` and `generation` is for, if still queued.
    fn queued_in(&self, slot: u32, generation: u32) -> Option<u32> {
        queued_in(&self.slots, &self.queue, slot, generation)
    }

    /// The smallest request queued at the last update (0 if none).
    pub(crate) fn smallest(&self) -> u32 {
        self.smallest
    }

    /// The smallest scavenger request queued at the last update (0 if none).
    pub(crate) fn smallest_scavenger(&self) -> u32 {
        self.smallest_scavenger
    }

    /// Whether `could` accepts some queued normal job (given its queue index).
    pub(crate) fn any_normal(&self, could: &impl Fn(u32) -> bool) -> bool {
        LaneCursor::default()
            .next(self, &self.normal, could)
            .is_some()
    }

    /// Every queued job's key and queue index, in order.
    pub(crate) fn in_order(&self) -> Vec<(QueueKey, u32)> {
        let mut cursor = Cursor::default();
        std::iter::from_fn(|| cursor.next(self, &|_| true)).collect()
    }
}

/// What a [`ClassCursor`] reads of the book.
impl Book {
    pub(super) fn classes(&self) -> &Classes {
        &self.scavenger
    }

    /// A scavenger job's key, by the last calculation's priorities.
    pub(super) fn key(&self, class: &Class, member: &Member) -> QueueKey {
        let job = Job {
            id: member.id,
            submitted_at: member.submitted_at,
            min_runtime: 0,
            leaf: class.leaf,
            gpus: class.gpus,
        };
        job.key(self.priorities())
    }

    /// The queue index of a class member's job, if it is still queued.
    pub(super) fn queued_at(&self, member: &Member) -> Option<u32> {
        self.queued_in(member.slot, member.generation)
    }
}

/// A place in one lane: the queued jobs from its head, merging the calculated order with the
/// jobs queued since.
#[derive(Clone, Copy, Default)]
struct LaneCursor {
    sorted: usize,
    fresh: usize,
}

impl LaneCursor {
    /// The next queued job `keep` accepts, skipping the rest: its key, queue index and slot.
    fn next(
        &mut self,
        book: &Book,
        lane: &Lane,
        keep: &impl Fn(u32) -> bool,
    ) -> Option<(QueueKey, u32, u32)> {
        loop {
            let a = lane.sorted.get(self.sorted);
            let b = lane.fresh.get(self.fresh);
            let e = match (a, b) {
                (None, None) => return None,
                (Some(a), Some(b)) if b.key < a.key => {
                    self.fresh += 1;
                    b
                }
                (Some(a), _) => {
                    self.sorted += 1;
                    a
                }
                (None, Some(b)) => {
                    self.fresh += 1;
                    b
                }
            };
            if let Some(q) = book.queued_index(e) {
                if keep(q) {
                    return Some((e.key, q, e.slot));
                }
            }
        }
    }
}

/// A place in the book's order: both lanes merged, each lane's next job looked up once.
#[derive(Default)]
pub(crate) struct Cursor {
    normal: LaneCursor,
    scavenger: ClassCursor,
    /// Each lane's next job (key, queue index), once looked up.
    heads: [Option<(QueueKey, u32)>; 2],
    looked: [bool; 2],
}

impl Cursor {
    fn head(
        &mut self,
        book: &Book,
        lane: usize,
        keep: &impl Fn(u32) -> bool,
    ) -> Option<(QueueKey, u32)> {
        if !self.looked[lane] {
            self.heads[lane] = if lane == NORMAL {
                self.normal
                    .next(book, &book.normal, keep)
                    .map(|(key, q, _)| (key, q))
            } else {
                self.scavenger.next(book, keep)
            };
            self.looked[lane] = true;
        }
        self.heads[lane]
    }

    /// The next queued job `keep` accepts (given its queue index).
    pub(crate) fn next(
        &mut self,
        book: &Book,
        keep: &impl Fn(u32) -> bool,
    ) -> Option<(QueueKey, u32)> {
        self.next_skipping(book, keep, false)
    }

    /// As [`Cursor::next`]; with `skip_scavengers`, the scavenger work ordered before the next
    /// normal job (all of it, if none is left) is passed over unseen. `keep` must judge
    /// scavenger work by its leaf and size alone: a class it refuses once is passed over whole.
    pub(crate) fn next_skipping(
        &mut self,
        book: &Book,
        keep: &impl Fn(u32) -> bool,
        skip_scavengers: bool,
    ) -> Option<(QueueKey, u32)> {
        let normal = self.head(book, NORMAL, keep);
        if skip_scavengers {
            match (self.looked[SCAVENGER], self.heads[SCAVENGER], normal) {
                // The looked-up head comes after the next normal job: nothing to skip.
                (true, Some((s, _)), Some((n, _))) if s > n => {}
                (_, _, Some((n, _))) => {
                    self.scavenger.skip_before(book, n);
                    self.looked[SCAVENGER] = false;
                }
                (_, _, None) => {
                    self.scavenger.skip_all();
                    self.looked[SCAVENGER] = false;
                }
            }
        }
        let scavenger = self.head(book, SCAVENGER, keep);
        let lane = match (normal, scavenger) {
            (None, None) => return None,
            (Some(n), Some(s)) if s.0 < n.0 => SCAVENGER,
            (Some(_), _) => NORMAL,
            (None, Some(_)) => SCAVENGER,
        };
        self.looked[lane] = false;
        self.heads[lane]
    }

    /// Narrowing made `keep` stricter: a head looked up under the old rule is dropped if the new
    /// one refuses it (every job the old rule passed over, the new one refuses too).
    pub(crate) fn rule_changed(&mut self, keep: &impl Fn(u32) -> bool) {
        for l in 0..2 {
            if self.looked[l] && self.heads[l].is_some_and(|(_, q)| !keep(q)) {
                self.looked[l] = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Config;
    use crate::sim::rng::Rng;
    use crate::tree::BudgetTree;
    use crate::Policy;

    fn engine(period: Time) -> Engine {
        let tree = BudgetTree::from_paths([("a", 1.0), ("a/x", 1.0), ("a/y", 3.0), ("b", 2.0)])
            .expect("valid tree");
        let mut config = Config {
            policy: Policy::Slurm,
            ..Config::default()
        };
        config.slurm.calc_period = period;
        Engine::new(tree, config)
    }

    /// Uniform in `[0, n)`.
    fn below(rng: &mut Rng, n: u64) -> u64 {
        rng.range(0, n as i64 - 1) as u64
    }

    fn spec(id: u64, rng: &mut Rng, leaves: &[BudgetId], now: Time) -> WorkloadSpec {
        WorkloadSpec {
            id: WorkloadId(id),
            leaf: leaves[below(rng, leaves.len() as u64) as usize],
            gpus: 1 + below(rng, 16) as u32,
            min_runtime: [0, 60, 900, 3600][below(rng, 4) as usize],
            resumable: below(rng, 2) == 0,
            priority: 0,
            submitted_at: now - below(rng, 20 * 86_400) as Time,
            time_limit: None,
        }
    }

    /// The queue sorted afresh by the priorities the book calculated last.
    fn sorted_afresh(book: &Book, queued: &[WorkloadSpec]) -> Vec<(QueueKey, u32)> {
        let mut keys: Vec<(QueueKey, u32)> = queued
            .iter()
            .enumerate()
            .map(|(q, w)| (Job::of(w).key(book.priorities()), q as u32))
            .collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn the_kept_order_is_the_queue_sorted_by_the_last_calculations_priorities() {
        for seed in 1..=4 {
            let mut engine = engine(300);
            let leaves: Vec<BudgetId> = engine.tree().leaves().collect();
            let mut rng = Rng::new(seed);
            let mut book = Book::default();
            let mut named = Book::default();
            let mut before_queue: Vec<WorkloadSpec> = Vec::new();
            let mut queued: Vec<WorkloadSpec> = Vec::new();
            let mut away: Vec<WorkloadSpec> = Vec::new();
            let mut next_id = if seed % 2 == 0 { DENSE - 50 } else { 0 };
            let mut now: Time = 1_000_000;
            let mut calculations = 0;
            for step in 0..400u64 {
                now += below(&mut rng, 200) as Time;
                // Usage moves the fair-share factors between calculations.
                let leaf = leaves[below(&mut rng, leaves.len() as u64) as usize];
                engine
                    .ledger_mut()
                    .charge(leaf, now - 100, now, below(&mut rng, 100_000) as f64);
                for _ in 0..below(&mut rng, 6) {
                    queued.push(spec(next_id, &mut rng, &leaves, now));
                    next_id += 1;
                }
                for _ in 0..below(&mut rng, 5) {
                    if !queued.is_empty() {
                        let i = below(&mut rng, queued.len() as u64) as usize;
                        away.push(queued.swap_remove(i));
                    }
                }
                if !away.is_empty() && below(&mut rng, 3) == 0 {
                    // Requeued: back with the same spec, anywhere in the queue.
                    let w = away.swap_remove(below(&mut rng, away.len() as u64) as usize);
                    let i = below(&mut rng, queued.len() as u64 + 1) as usize;
                    queued.insert(i, w);
                }
                if !queued.is_empty() && below(&mut rng, 10) == 0 {
                    // The same id, asking for something else.
                    let i = below(&mut rng, queued.len() as u64) as usize;
                    queued[i].gpus = 1 + queued[i].gpus % 16;
                    queued[i].min_runtime = if queued[i].min_runtime == 0 { 60 } else { 0 };
                }
                if step % 50 == 0 {
                    queued.reverse();
                }
                let before = book.calc.as_ref().map(|c| c.at);
                book.update(&engine, &queued, now, 64, None);
                if book.calc.as_ref().map(|c| c.at) != before {
                    calculations += 1;
                }
                assert_eq!(
                    book.in_order(),
                    sorted_afresh(&book, &queued),
                    "seed {seed}, step {step}"
                );
                let smallest = queued.iter().map(|w| w.gpus).min().unwrap_or(0);
                assert_eq!(book.smallest(), smallest);
                // A driver naming the places it changed (now and then losing count) keeps the
                // same order and sizes.
                let touched: Vec<u32> = (0..queued.len().min(before_queue.len()))
                    .filter(|&i| queued[i] != before_queue[i])
                    .map(|i| i as u32)
                    .collect();
                let pass = if step % 37 == 20 { step + 1_000 } else { step };
                let changes = Changes {
                    pass,
                    running: &[],
                    queued: &touched,
                };
                named.update(&engine, &queued, now, 64, Some(&changes));
                assert_eq!(
                    named.in_order(),
                    book.in_order(),
                    "seed {seed}, step {step}"
                );
                assert_eq!(named.smallest(), smallest);
                let scavenger = queued.iter().filter(|w| w.min_runtime <= 0).map(|w| w.gpus);
                assert_eq!(named.smallest_scavenger(), scavenger.min().unwrap_or(0));
                assert_eq!(book.smallest_scavenger(), named.smallest_scavenger());
                before_queue.clone_from(&queued);
            }
            assert!(calculations > 20, "recalculated {calculations} times");
            assert!(book.slots.len() <= 2 * queued.len() + 1024 + 2_000);
        }
    }

    #[test]
    fn priorities_are_recalculated_once_a_period_and_new_jobs_get_theirs_at_submission() {
        let engine = engine(300);
        let leaves: Vec<BudgetId> = engine.tree().leaves().collect();
        let mut rng = Rng::new(9);
        let mut book = Book::default();
        let old = spec(1, &mut rng, &leaves, 600);
        book.update(&engine, &[old], 600, 64, None);
        assert_eq!(book.calc.as_ref().map(|c| c.at), Some(600));
        // Later in the same period: no recalculation; a job submitted now gets age 0.
        let mut new = spec(2, &mut rng, &leaves, 800);
        new.submitted_at = 800;
        book.update(&engine, &[old, new], 850, 64, None);
        assert_eq!(book.calc.as_ref().map(|c| c.at), Some(600));
        let fresh = Priorities::new(&engine, 600, 64, &engine.config().slurm);
        assert_eq!(
            book.in_order(),
            sorted_afresh(&book, &[old, new]),
            "ordered by the priorities of 600"
        );
        assert_eq!(
            Job::of(&new).key(book.priorities()),
            Job::of(&new).key(&fresh)
        );
        // The next period recalculates.
        book.update(&engine, &[old, new], 900, 64, None);
        assert_eq!(book.calc.as_ref().map(|c| c.at), Some(900));
        // A period of 0 recalculates at every update.
        let engine = self::engine(0);
        let mut book = Book::default();
        book.update(&engine, &[old], 600, 64, None);
        book.update(&engine, &[old], 601, 64, None);
        assert_eq!(book.calc.as_ref().map(|c| c.at), Some(601));
    }
}
