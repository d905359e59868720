//! The pool kept between passes, for a driver that names what it changed ([`Changes`]).
//!
//! Building the pool reads every run of the snapshot at every pass: on a month of 1,024 GPUs,
//! about a thousand runs at each of some 60,000 passes, a quarter of the fair-share pass and more
//! of the peers'. A driver that applies the engine's actions itself (the simulator) knows which
//! entries of its snapshot it touched since the last pass, so the engine keeps the pool as that
//! pass began, takes back what the pass did, and applies only those entries: the pool's runs stay
//! in the snapshot's order and each host's runs in workload order, so the pool it gives the next
//! pass is the one [`Pool::new`] would build (checked against it in debug builds). What depends on
//! the time is brought up to date at every pass: each run's cost is read at its time; while the
//! leaves rank as they did at the last pass, the counters of runs are kept with the pool (put back
//! after the pass, the runs the driver changed taken out and counted in, those whose protection
//! ended since moved), else worked out again from every run as `Pool::new` does. Hosts changing
//! state, a different policy, or a driver that skipped a pass: the pool is built afresh.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Pool, Run, Slot};
use crate::cluster::NodeState;
use crate::engine::Policy;
use crate::ids::{BudgetId, Time};
use crate::snapshot::{Changes, ClusterState, RunningWorkload};

/// Entries a host's list of runs has room for: its runs in the snapshot (or as many as it has
/// GPUs, if more), then one run per GPU that the pass may start. Each run holds at least one GPU
/// of each host it is on, so a host never holds more runs than GPUs; a kept pool whose host
/// would is built afresh.
pub(super) fn room(count: u32, gpus: u32) -> u32 {
    count.max(gpus) + gpus
}

/// What a pass changes in the pool and how to take it back.
#[derive(Debug)]
pub(crate) struct Base {
    /// The hosts as the pass began; those changed since (by the pass, or by bringing the pool
    /// up to date) are listed in `changed`.
    slots: Vec<Slot>,
    changed: Vec<u32>,
    runs: usize,
    parts: usize,
    idle: Idle,
    /// Runs of the snapshot this pass stopped.
    released: Vec<u32>,
    /// Hosts whose runs the pass changed (of those in `changed`): what was learned of their
    /// holders goes when the pass is taken back. Reserving a host does not change its runs.
    runs_changed: Vec<u32>,
    nodes: Vec<NodeState>,
    /// Parts of the snapshot's runs (the rest of `Pool::parts` past the base is stale).
    live_parts: usize,
    ranks: usize,
    /// Scratch: the snapshot's runs bringing the pool up to date looks at.
    touched: Vec<u32>,
    /// The counters of runs as the pass began.
    counts: Counts,
    /// The leaves in the rank order the runs were counted by, if the counters were kept since
    /// they were last worked out from every run (`None`: work them out again).
    order: Option<Vec<BudgetId>>,
    /// Snapshot runs counted as protected: `(end of protection, run, where its parts start)`,
    /// soonest first (an entry whose run is no longer there is passed over).
    ends: BinaryHeap<Reverse<(Time, u32, u32)>>,
    /// Snapshot runs put on their hosts since the pass began, not counted yet.
    inserted: Vec<u32>,
}

/// The counters [`Pool::count_run`] keeps.
#[derive(Clone, Debug, Default)]
struct Counts {
    free_work_gpus: u32,
    unprotected_by_rank: Vec<u32>,
    unprotected_resumable_gpus: u32,
    baseline_preemptible_gpus: u32,
    debug_gpus: u32,
}

impl Counts {
    fn save(&mut self, pool: &Pool) {
        self.free_work_gpus = pool.free_work_gpus;
        self.unprotected_by_rank
            .clone_from(&pool.unprotected_by_rank);
        self.unprotected_resumable_gpus = pool.unprotected_resumable_gpus;
        self.baseline_preemptible_gpus = pool.baseline_preemptible_gpus;
        self.debug_gpus = pool.debug_gpus;
    }

    fn restore(&self, pool: &mut Pool) {
        pool.free_work_gpus = self.free_work_gpus;
        pool.unprotected_by_rank
            .clone_from(&self.unprotected_by_rank);
        pool.unprotected_resumable_gpus = self.unprotected_resumable_gpus;
        pool.baseline_preemptible_gpus = self.baseline_preemptible_gpus;
        pool.debug_gpus = self.debug_gpus;
    }
}

impl Base {
    pub(super) fn touched(&mut self, node: usize) {
        self.changed.push(node as u32);
    }

    pub(super) fn runs_changed(&mut self, node: usize) {
        self.runs_changed.push(node as u32);
    }

    pub(super) fn released(&mut self, run: u32) {
        if (run as usize) < self.runs {
            self.released.push(run);
        }
    }
}

/// The counters kept from the hosts' idle GPUs (those from runs are worked out at every pass).
#[derive(Clone, Debug)]
struct Idle {
    idle_hist: [u32; 65],
    idle_hosts: Vec<u64>,
    idle_total: u32,
    whole_idle_gpus: u32,
}

/// How a policy's pass builds its pool (as [`Pool::new`]'s arguments).
pub(crate) struct Build<'a, F> {
    pub ranks: usize,
    pub rank_of: F,
    /// The leaves in rank order (`rank_of` gives each one's place in it).
    pub order: &'a [BudgetId],
    pub victim_from: fn(&Run) -> Option<Time>,
}

impl Idle {
    /// Copies the pool's counters in (reusing this copy's allocation: once a pass).
    fn save(&mut self, pool: &Pool) {
        self.idle_hist = pool.idle_hist;
        self.idle_hosts.clone_from(&pool.idle_hosts);
        self.idle_total = pool.idle_total;
        self.whole_idle_gpus = pool.whole_idle_gpus;
    }

    /// Copies them back into the pool.
    fn restore(&self, pool: &mut Pool) {
        pool.idle_hist = self.idle_hist;
        pool.idle_hosts.clone_from(&self.idle_hosts);
        pool.idle_total = self.idle_total;
        pool.whole_idle_gpus = self.whole_idle_gpus;
    }
}

/// The engine's side: the pool kept at a driver's pass.
#[derive(Default)]
pub(crate) struct Kept {
    pool: Option<(Box<Pool>, u64, Policy)>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("pass", &self.pool.as_ref().map(|k| k.1))
            .finish()
    }
}

impl Kept {
    /// The pool for the pass `changes` leads to: the kept one brought up to date, if it was kept
    /// at the driver's previous pass under the same policy, else a new one.
    pub(crate) fn pool_for<F: Fn(BudgetId) -> u32>(
        &mut self,
        policy: Policy,
        state: &ClusterState<'_>,
        changes: &Changes<'_>,
        now: Time,
        build: Build<'_, F>,
    ) -> Box<Pool> {
        let Build {
            ranks,
            rank_of,
            order,
            victim_from,
        } = build;
        let kept = self.pool.take().filter(|&(_, pass, kept_policy)| {
            kept_policy == policy && changes.pass == pass.wrapping_add(1)
        });
        if let Some((mut pool, _, _)) = kept {
            if pool.sync(state, changes, ranks) {
                pool.refresh(now, ranks, &rank_of, order);
                pool.checkpoint();
                #[cfg(debug_assertions)]
                pool.assert_as_new(&Pool::new(state, now, ranks, &rank_of, victim_from));
                return pool;
            }
        }
        let mut pool = Box::new(Pool::new(state, now, ranks, rank_of, victim_from));
        pool.base = Some(Base {
            slots: Vec::new(),
            changed: Vec::new(),
            runs: 0,
            parts: 0,
            idle: pool.idle(),
            released: Vec::new(),
            runs_changed: Vec::new(),
            nodes: state.nodes.to_vec(),
            live_parts: pool.parts.len(),
            ranks,
            touched: Vec::new(),
            counts: Counts::default(),
            order: None,
            ends: BinaryHeap::new(),
            inserted: Vec::new(),
        });
        pool.checkpoint();
        pool
    }

    /// Takes back what the pass did and keeps the pool for the driver's next pass.
    pub(crate) fn keep(&mut self, mut pool: Box<Pool>, policy: Policy, changes: &Changes<'_>) {
        if pool.rollback() {
            self.pool = Some((pool, changes.pass, policy));
        }
    }
}

impl Pool {
    fn idle(&self) -> Idle {
        Idle {
            idle_hist: self.idle_hist,
            idle_hosts: self.idle_hosts.clone(),
            idle_total: self.idle_total,
            whole_idle_gpus: self.whole_idle_gpus,
        }
    }

    /// Remembers the pool as the pass begins.
    fn checkpoint(&mut self) {
        let (runs, parts) = (self.runs.len(), self.parts.len());
        let mut base = self.base.take().expect("a kept pool");
        base.idle.save(self);
        base.counts.save(self);
        if base.slots.len() == self.slots.len() {
            for &node in &base.changed {
                base.slots[node as usize].clone_from(&self.slots[node as usize]);
            }
        } else {
            base.slots.clone_from(&self.slots);
        }
        base.changed.clear();
        base.runs_changed.clear();
        base.runs = runs;
        base.parts = parts;
        base.released.clear();
        self.base = Some(base);
    }

    /// Back to the pool as the pass began. `false` if it was not kept.
    fn rollback(&mut self) -> bool {
        let Some(mut base) = self.base.take() else {
            return false;
        };
        for &run in &base.released {
            self.runs[run as usize].alive = true;
        }
        base.released.clear();
        self.runs.truncate(base.runs);
        self.parts.truncate(base.parts);
        for &node in &base.changed {
            self.slots[node as usize].clone_from(&base.slots[node as usize]);
            self.forget_bound(node as usize);
        }
        // What was learned of their holders may count the pass's own starts and stops.
        for &node in &base.runs_changed {
            self.forget_holders(node as usize);
        }
        base.changed.clear();
        base.runs_changed.clear();
        base.idle.restore(self);
        base.counts.restore(self);
        self.base = Some(base);
        self.held.clear();
        self.loosened.clear();
        true
    }

    /// Applies the entries of `running` that `changes` names (and any past the shorter length).
    /// `false` if the pool must be built afresh instead.
    fn sync(&mut self, state: &ClusterState<'_>, changes: &Changes<'_>, ranks: usize) -> bool {
        let base = self.base.as_mut().expect("a kept pool");
        if base.nodes != state.nodes
            || base.ranks != ranks
            || self.parts.len() > 4 * base.live_parts + 4096
        {
            return false;
        }
        let (old, new) = (self.runs.len(), state.running.len());
        let mut touched = std::mem::take(&mut base.touched);
        changes.running_touched(old, new, &mut touched);
        for &i in touched.iter().take_while(|&&i| (i as usize) < old) {
            self.remove_run(i);
        }
        self.runs.truncate(new);
        for &i in touched.iter().take_while(|&&i| (i as usize) < new) {
            if !self.insert_run(i, &state.running[i as usize]) {
                return false;
            }
        }
        self.base.as_mut().expect("a kept pool").touched = touched;
        true
    }

    /// Takes snapshot run `i` off its hosts and out of the counters (as counted at the last
    /// pass's time and ranks).
    fn remove_run(&mut self, i: u32) {
        self.count_run(i as usize, -1);
        if self.runs[i as usize].spec.is_debug() {
            self.debug_gpus -= self.runs[i as usize].gpus;
        }
        let (at, len) = self.runs[i as usize].parts;
        for k in at..at + len {
            let part = self.parts[k as usize];
            let node = part.node.index();
            self.set_idle(node, part.gpus, true);
            let slot = &mut self.slots[node];
            let list =
                &mut self.slot_runs[slot.runs_at as usize..(slot.runs_at + slot.runs_len) as usize];
            if let Some(p) = list.iter().position(|&(run, _)| run == i) {
                list[p..].rotate_left(1);
                slot.runs_len -= 1;
            }
        }
        self.base.as_mut().expect("a kept pool").live_parts -= len as usize;
    }

    /// Puts snapshot run `i` on its hosts, each host's runs kept in workload order. `false` if a
    /// host has no room for it or its GPUs are not idle (the pool is then built afresh, and the
    /// snapshot's own checks say what is wrong).
    fn insert_run(&mut self, i: u32, run: &RunningWorkload) -> bool {
        let at = self.parts.len() as u32;
        let (mut gpus, mut usable_gpus) = (0, 0);
        for part in &run.placement.parts {
            let node = part.node.index();
            let Some(slot) = self.slots.get(node) else {
                return false;
            };
            let end = self
                .slots
                .get(node + 1)
                .map_or(self.slot_runs.len() as u32, |s| s.runs_at);
            if slot.runs_len + slot.size >= end - slot.runs_at
                || !part.gpus.without(slot.free).is_empty()
            {
                return false;
            }
            self.set_idle(node, part.gpus, false);
            let slot = &mut self.slots[node];
            let (from, to) = (
                slot.runs_at as usize,
                (slot.runs_at + slot.runs_len) as usize,
            );
            let p = self.slot_runs[from..to]
                .iter()
                .position(|&(other, _)| self.runs[other as usize].spec.id > run.spec.id)
                .map_or(to, |p| from + p);
            self.slot_runs[p..=to].rotate_right(1);
            self.slot_runs[p] = (i, part.gpus);
            slot.runs_len += 1;
            let count = part.gpus.count();
            gpus += count;
            if slot.schedulable() {
                usable_gpus += count;
            }
            self.parts.push(*part);
        }
        let entry = Run {
            spec: run.spec,
            started_at: run.started_at,
            alive: true,
            fresh: false,
            rank: 0,
            protected_until: run.protected_until(),
            baseline_protected: run.baseline_protected,
            parts: (at, run.placement.parts.len() as u32),
            usable_gpus,
            gpus,
        };
        if (i as usize) < self.runs.len() {
            self.runs[i as usize] = entry;
        } else {
            debug_assert_eq!(i as usize, self.runs.len());
            self.runs.push(entry);
        }
        let base = self.base.as_mut().expect("a kept pool");
        base.live_parts += run.placement.parts.len();
        base.inserted.push(i);
        true
    }

    /// What depends on the time: each run's rank, and the counters of runs (see the module's
    /// notes).
    fn refresh(
        &mut self,
        now: Time,
        ranks: usize,
        rank_of: &impl Fn(BudgetId) -> u32,
        order: &[BudgetId],
    ) {
        let mut base = self.base.take().expect("a kept pool");
        if base.order.as_deref() == Some(order) {
            // Protection that ended since the last pass.
            while let Some(&Reverse((until, run, at))) = base.ends.peek() {
                if until > now {
                    break;
                }
                base.ends.pop();
                let Some(r) = self.runs.get(run as usize) else {
                    continue;
                };
                if r.parts.0 != at || r.protected_until != Some(until) {
                    continue;
                }
                let (rank, gpus, resumable) = (r.rank as usize, r.usable_gpus, r.spec.resumable);
                self.unprotected_by_rank[rank] += gpus;
                if resumable {
                    self.unprotected_resumable_gpus += gpus;
                }
            }
            self.now = now;
            for k in 0..base.inserted.len() {
                let i = base.inserted[k] as usize;
                self.runs[i].rank = rank_of(self.runs[i].spec.leaf);
                self.count_in(i, &mut base.ends);
            }
        } else {
            self.now = now;
            self.free_work_gpus = 0;
            self.unprotected_by_rank.clear();
            self.unprotected_by_rank.resize(ranks.max(1), 0);
            self.unprotected_resumable_gpus = 0;
            self.baseline_preemptible_gpus = 0;
            self.debug_gpus = 0;
            base.ends.clear();
            for i in 0..self.runs.len() {
                self.runs[i].rank = rank_of(self.runs[i].spec.leaf);
                self.count_in(i, &mut base.ends);
            }
            base.order = Some(order.to_vec());
        }
        base.inserted.clear();
        self.base = Some(base);
        self.epoch += 1;
        self.gang_hosts.take();
        self.changes = 0;
        self.requeued_allocated = false;
        self.requeued_free = None;
    }

    /// Counts snapshot run `i` in at the pool's time, noting when its protection ends.
    fn count_in(&mut self, i: usize, ends: &mut BinaryHeap<Reverse<(Time, u32, u32)>>) {
        let r = &self.runs[i];
        if r.spec.is_debug() {
            self.debug_gpus += r.gpus;
        }
        if r.spec.is_allocated() && r.is_protected(self.now) {
            let until = r.protected_until.expect("protected");
            ends.push(Reverse((until, i as u32, r.parts.0)));
        }
        self.count_run(i, 1);
    }

    /// That this pool is the one [`Pool::new`] built from the same snapshot.
    #[cfg(debug_assertions)]
    fn assert_as_new(&self, new: &Pool) {
        assert_eq!(self.runs.len(), new.runs.len(), "runs");
        for (i, (a, b)) in self.runs.iter().zip(&new.runs).enumerate() {
            let same = a.spec == b.spec
                && a.started_at == b.started_at
                && (a.alive, a.fresh, a.rank) == (b.alive, b.fresh, b.rank)
                && (a.protected_until, a.baseline_protected)
                    == (b.protected_until, b.baseline_protected)
                && (a.usable_gpus, a.gpus) == (b.usable_gpus, b.gpus)
                && self.parts_of(i as u32) == new.parts_of(i as u32);
            assert!(same, "run {i}: kept {a:?}, new {b:?}");
        }
        for (n, (a, b)) in self.slots.iter().zip(&new.slots).enumerate() {
            assert_eq!(
                (a.all, a.size, a.free, a.health, a.reservation, a.reserved),
                (b.all, b.size, b.free, b.health, b.reservation, b.reserved),
                "host {n}"
            );
            assert_eq!(self.slot_runs(n), new.slot_runs(n), "host {n}'s runs");
            // What was kept of the possible victims from earlier passes.
            assert_eq!(
                self.victim_gpus(n),
                new.victim_gpus(n),
                "host {n}'s victims"
            );
            assert_eq!(self.holders(n), new.holders(n), "host {n}'s holders");
        }
        assert_eq!(
            (self.idle_hist, self.idle_total, self.whole_idle_gpus),
            (new.idle_hist, new.idle_total, new.whole_idle_gpus)
        );
        assert_eq!(self.idle_hosts, new.idle_hosts);
        assert_eq!(self.free_work_gpus, new.free_work_gpus);
        assert_eq!(
            (&self.unprotected_by_rank, self.unprotected_resumable_gpus),
            (&new.unprotected_by_rank, new.unprotected_resumable_gpus)
        );
        assert_eq!(
            (
                self.baseline_preemptible_gpus,
                self.debug_gpus,
                self.node_size
            ),
            (new.baseline_preemptible_gpus, new.debug_gpus, new.node_size)
        );
    }
}
