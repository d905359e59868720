//! The priority baseline's queue kept between passes, by class, for a driver that names its
//! changes ([`Changes`]).
//!
//! Which workloads a baseline pass looks at ([`crate::baseline_order::Turn`]) depends only on a
//! workload's leaf, whether it is allocated, its size and its priority: a class. The book keeps
//! each class's queued workloads in queue order (priority, then age), so a pass decides a turn
//! per class instead of per workload and draws idle-only work of a size from its classes'
//! heads, instead of reading the whole queue twice. The decisions are those of the pass that
//! reads the queue afresh (tested by driving both, `tests/engine/changes.rs`).

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use crate::baseline_order::{key, Key};
use crate::ids::{BudgetId, WorkloadId};
use crate::snapshot::{Changes, WorkloadSpec};

/// What decides a workload's turn in a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ClassId {
    leaf: BudgetId,
    allocated: bool,
    gpus: u32,
    priority: i32,
}

impl ClassId {
    fn of(w: &WorkloadSpec) -> ClassId {
        ClassId {
            leaf: w.leaf,
            allocated: w.is_allocated(),
            gpus: w.gpus,
            priority: w.priority,
        }
    }
}

/// One queued workload as the book last saw it at its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    id: WorkloadId,
    key: Key,
    class: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub gpus: u32,
    /// Its queued workloads by key, with their queue index.
    pub members: BTreeSet<(Key, u32)>,
}

impl Class {
    /// Its members after key `after` (all if `None`), in order.
    pub(crate) fn after(&self, after: Option<Key>) -> impl Iterator<Item = (Key, u32)> + '_ {
        let from = match after {
            // Keys are unique: every member of key `a` is at or before `(a, u32::MAX)`.
            Some(a) => Bound::Excluded((a, u32::MAX)),
            None => Bound::Unbounded,
        };
        self.members.range((from, Bound::Unbounded)).copied()
    }
}

#[derive(Clone, Debug, Default)]
pub struct BaselineBook {
    /// The driver's pass the book was last brought up to.
    synced: Option<u64>,
    queue: Vec<Entry>,
    classes: Vec<Class>,
    index: HashMap<ClassId, u32>,
}

impl BaselineBook {
    /// Brings the book up to `queued`: by the changes named if they follow the last update's
    /// pass, else read whole.
    pub(crate) fn follow(&mut self, queued: &[WorkloadSpec], changes: &Changes<'_>) {
        let follows = self
            .synced
            .is_some_and(|synced| changes.pass == synced.wrapping_add(1));
        self.synced = Some(changes.pass);
        if !follows {
            self.queue.clear();
            for class in &mut self.classes {
                class.members.clear();
            }
            for (q, w) in queued.iter().enumerate() {
                let entry = self.entry(w);
                self.queue.push(entry);
                self.classes[entry.class as usize]
                    .members
                    .insert((entry.key, q as u32));
            }
            return;
        }
        let (old, new) = (self.queue.len(), queued.len());
        let mut touched = Vec::new();
        changes.queued_touched(old, new, &mut touched);
        // Out first, then in: a workload that moved is touched at both places.
        touched.retain(|&q| {
            let Some(&was) = self.queue.get(q as usize) else {
                return true;
            };
            if queued
                .get(q as usize)
                .is_some_and(|w| was.id == w.id && was.key == key(w) && self.is(was.class, w))
            {
                return false;
            }
            self.classes[was.class as usize]
                .members
                .remove(&(was.key, q));
            true
        });
        self.queue.truncate(new);
        for q in touched {
            let Some(w) = queued.get(q as usize) else {
                continue;
            };
            let entry = self.entry(w);
            if let Some(at) = self.queue.get_mut(q as usize) {
                *at = entry;
            } else {
                self.queue.push(entry);
            }
            self.classes[entry.class as usize]
                .members
                .insert((entry.key, q));
        }
        #[cfg(debug_assertions)]
        self.assert_as_read(queued);
    }

    fn is(&self, class: u32, w: &WorkloadSpec) -> bool {
        self.index.get(&ClassId::of(w)) == Some(&class)
    }

    fn entry(&mut self, w: &WorkloadSpec) -> Entry {
        let id = ClassId::of(w);
        let class = *self.index.entry(id).or_insert_with(|| {
            self.classes.push(Class {
                gpus: id.gpus,
                members: BTreeSet::new(),
            });
            self.classes.len() as u32 - 1
        });
        Entry {
            id: w.id,
            key: key(w),
            class,
        }
    }

    /// The classes with queued work, each with the index of its first member.
    pub(crate) fn classes(&self) -> impl Iterator<Item = (u32, &Class, u32)> + '_ {
        self.classes.iter().enumerate().filter_map(|(c, class)| {
            let &(_, q) = class.members.first()?;
            Some((c as u32, class, q))
        })
    }

    pub(crate) fn class(&self, c: u32) -> &Class {
        &self.classes[c as usize]
    }

    /// The class of the workload at queue index `q`.
    pub(crate) fn class_of(&self, q: u32) -> u32 {
        self.queue[q as usize].class
    }

    /// Debug builds: the book holds exactly the queue, each workload in its class.
    #[cfg(debug_assertions)]
    fn assert_as_read(&self, queued: &[WorkloadSpec]) {
        assert_eq!(self.queue.len(), queued.len(), "the book's queue length");
        for (q, (entry, w)) in self.queue.iter().zip(queued).enumerate() {
            assert!(
                entry.id == w.id && entry.key == key(w) && self.is(entry.class, w),
                "the book's entry at {q}"
            );
            assert!(
                self.classes[entry.class as usize]
                    .members
                    .contains(&(entry.key, q as u32)),
                "workload {q} in its class"
            );
        }
        let members: usize = self.classes.iter().map(|c| c.members.len()).sum();
        assert_eq!(members, queued.len(), "no member left behind");
    }
}
