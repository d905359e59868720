//! Resources and signals a part of a page makes for one key, made once under the page's owner.
//!
//! A server render resolves a reactive child more than once: Leptos calls the closure once to
//! find the resources it reads (`dry_resolve`) and again to render it. A part built inside
//! such a closure (the Reports page's charts, trend and people table, inside the review's
//! `Suspend`) made its resources each time, so the server fetched their data twice and sent it
//! to the browser twice. Made through [`MadeOnce`], the second build gets the first one's.

use leptos::prelude::*;

/// What a part of the page makes per key `K` (resources and signals: `Copy` handles). Each key's
/// are made under a child of the page's owner, so they live as long as the page rather than the
/// build that asked; the two latest keys' are kept (the one shown and, while a `Transition`
/// loads it, the one before), and older ones disposed, so a signal the part tracks (a chart's
/// node) does not refetch every period visited.
pub(crate) struct MadeOnce<K: Send + Sync + 'static, T: Send + Sync + 'static> {
    owner: StoredValue<Option<Owner>>,
    made: StoredValue<Vec<(K, T, Owner)>>,
}

impl<K: Send + Sync + 'static, T: Send + Sync + 'static> Clone for MadeOnce<K, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Send + Sync + 'static, T: Send + Sync + 'static> Copy for MadeOnce<K, T> {}

/// How many keys' values are kept.
const KEPT: usize = 2;

impl<K: PartialEq + Send + Sync + 'static, T: Copy + Send + Sync + 'static> MadeOnce<K, T> {
    /// Call while the page's component runs: what is made belongs to its owner.
    pub(crate) fn new() -> Self {
        MadeOnce {
            owner: StoredValue::new(Owner::current()),
            made: StoredValue::new(Vec::new()),
        }
    }

    /// What was made for `key`, or `make()` run now under the page's owner and kept.
    pub(crate) fn get(&self, key: K, make: impl FnOnce() -> T) -> T {
        let found = self
            .made
            .with_value(|made| made.iter().find(|(k, ..)| *k == key).map(|(_, t, _)| *t));
        if let Some(t) = found {
            return t;
        }
        let owner = match self.owner.get_value() {
            Some(page) => page.child(),
            None => Owner::new(),
        };
        let t = owner.with(make);
        let dropped = self.made.try_update_value(|made| {
            made.push((key, t, owner));
            let excess = made.len().saturating_sub(KEPT);
            made.drain(..excess).map(|(.., o)| o).collect::<Vec<_>>()
        });
        for old in dropped.into_iter().flatten() {
            old.cleanup();
        }
        t
    }
}
