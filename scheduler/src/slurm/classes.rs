//! The SLURM peer's scavenger work, kept by class between passes.
//!
//! Scavenger work's priority is its leaf's fair-share term, its size's term and the scavenger
//! QOS's (the same for every job of a leaf and size) plus its age, which only grows the earlier a
//! job was submitted; ties go to the earlier submission, then the lower id. So within a class (a
//! leaf and a size) the queue order is submission order, whatever the priorities of the last
//! calculation: each class keeps its jobs in that order for good, and a pass merges the classes'
//! next jobs by their keys. A recalculation then re-keys nothing, a pass keys only the jobs it
//! reads, and a class whose size cannot start is passed over whole.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::ids::{BudgetId, Time, WorkloadId};
use crate::queue::QueueKey;

use super::book::{Book, Job};

/// One job of a class: what orders it there, and its slot in the book.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member {
    pub submitted_at: Time,
    pub id: WorkloadId,
    pub slot: u32,
    pub generation: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub leaf: BudgetId,
    pub gpus: u32,
    /// In submission order, then id; some no longer queued.
    pub members: Vec<Member>,
}

#[derive(Clone, Default)]
pub(crate) struct Classes {
    pub classes: Vec<Class>,
    index: HashMap<(BudgetId, u32), u32>,
}

impl Classes {
    /// Lists a job of `leaf` asking for `gpus` in its class.
    pub(crate) fn insert(&mut self, leaf: BudgetId, gpus: u32, member: Member) {
        let next = self.classes.len() as u32;
        let c = *self.index.entry((leaf, gpus)).or_insert(next);
        if c == next {
            self.classes.push(Class {
                leaf,
                gpus,
                members: Vec::new(),
            });
        }
        let members = &mut self.classes[c as usize].members;
        let order = |m: &Member| (m.submitted_at, m.id);
        let at = members.partition_point(|m| order(m) < order(&member));
        members.insert(at, member);
    }

    /// Takes `job`'s entry of `generation` out of its class, if it is there.
    pub(crate) fn remove(&mut self, job: &Job, generation: u32) {
        let Some(&c) = self.index.get(&(job.leaf, job.gpus)) else {
            return;
        };
        let members = &mut self.classes[c as usize].members;
        let at = members.partition_point(|m| (m.submitted_at, m.id) < (job.submitted_at, job.id));
        if members
            .get(at)
            .is_some_and(|m| m.id == job.id && m.generation == generation)
        {
            members.remove(at);
        }
    }

    /// Keeps the members `keep` accepts, renumbered as it says (their new slot and generation).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Member) -> Option<(u32, u32)>) {
        for class in &mut self.classes {
            class.members.retain_mut(|m| match keep(m) {
                Some((slot, generation)) => {
                    m.slot = slot;
                    m.generation = generation;
                    true
                }
                None => false,
            });
        }
    }
}

/// A place in the scavenger work's order: each class's next job, merged by key. Built at the
/// first read, from the first job at or after `floor` in each class.
#[derive(Default)]
pub(crate) struct ClassCursor {
    heap: Option<BinaryHeap<Reverse<(QueueKey, u32, u32)>>>,
    floor: Option<QueueKey>,
    done: bool,
}

impl ClassCursor {
    /// The next queued job whose class `keep` accepts, judged on one of its jobs (given its queue
    /// index): a class refused is not read again by this cursor.
    pub(crate) fn next(
        &mut self,
        book: &Book,
        keep: &impl Fn(u32) -> bool,
    ) -> Option<(QueueKey, u32)> {
        if self.done {
            return None;
        }
        let floor = self.floor;
        let heap = self.heap.get_or_insert_with(|| {
            let classes = book.classes();
            let heads = (0..classes.classes.len()).filter_map(|c| {
                let pos = first_at_or_after(book, &classes.classes[c], 0, floor);
                head(book, classes, c, pos)
            });
            heads.collect()
        });
        let classes = book.classes();
        while let Some(Reverse((key, c, pos))) = heap.pop() {
            let member = &classes.classes[c as usize].members[pos as usize];
            let Some(q) = book.queued_at(member) else {
                // The book drops the entries of work that left at every update: none is expected.
                debug_assert!(false, "a scavenger entry outlived its job");
                heap.extend(head(book, classes, c as usize, pos as usize + 1));
                continue;
            };
            if !keep(q) {
                continue;
            }
            heap.extend(head(book, classes, c as usize, pos as usize + 1));
            return Some((key, q));
        }
        None
    }

    /// Moves past every job ordered before `key`.
    pub(crate) fn skip_before(&mut self, book: &Book, key: QueueKey) {
        let Some(heap) = &mut self.heap else {
            self.floor = self.floor.max(Some(key));
            return;
        };
        let classes = book.classes();
        while let Some(&Reverse((first, c, pos))) = heap.peek() {
            if first >= key {
                break;
            }
            heap.pop();
            let class = &classes.classes[c as usize];
            let pos = first_at_or_after(book, class, pos as usize, Some(key));
            heap.extend(head(book, classes, c as usize, pos));
        }
    }

    pub(crate) fn skip_all(&mut self) {
        self.done = true;
    }
}

/// The first member of `class` from `from` on whose key is at least `floor`: keys rise along a
/// class, so a binary search.
fn first_at_or_after(book: &Book, class: &Class, from: usize, floor: Option<QueueKey>) -> usize {
    match floor {
        None => from,
        Some(floor) => from + class.members[from..].partition_point(|m| book.key(class, m) < floor),
    }
}

/// Class `c`'s member at `pos` as a heap entry, if there is one.
fn head(
    book: &Book,
    classes: &Classes,
    c: usize,
    pos: usize,
) -> Option<Reverse<(QueueKey, u32, u32)>> {
    let class = &classes.classes[c];
    let member = class.members.get(pos)?;
    Some(Reverse((book.key(class, member), c as u32, pos as u32)))
}
