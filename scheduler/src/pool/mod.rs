//! The working state of one decision pass: which GPUs are idle, who holds the rest, what is
//! reserved, and counters that let the pass skip hopeless work without searching.

use std::cell::{Cell, OnceCell, RefCell};

mod bounds;
mod holders;
mod kept;
mod outlooks;

pub(crate) use holders::Blockers;
use holders::{Firsts, Holders};
pub(crate) use kept::{Build, Kept};
use outlooks::Outlooks;
pub(crate) use outlooks::Seen;

use crate::cluster::{GpuSet, Health, NodeGpus, Placement};
use crate::ids::{BudgetId, NodeId, Time, WorkloadId};
use crate::queue::QueueKey;
use crate::snapshot::{ClusterState, WorkloadSpec};

/// What preempting a set of workloads costs, compared field by field (DESIGN §4.6, "non-resumable
/// work last"): any allocated non-resumable progress lost is worse than any unallocated
/// non-resumable progress lost, which is worse than stopping any resumable work (it keeps its
/// progress), allocated before unallocated. Non-resumable and free fields sum `GPUs × seconds
/// into the current run` (at least 1 s): the progress lost. Resumable allocated work loses no
/// progress, so its field prefers work that has run longest past its protection: `GPUs × (a week
/// − seconds since its protection ended)`, at least 1 s — a job just out of its minimum runtime,
/// likely nearly done if it is short, is the last resumable one taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Cost {
    allocated_final: i64,
    free_final: i64,
    allocated_resumable: i64,
    free_resumable: i64,
}

impl Cost {
    pub(crate) const ZERO: Cost = Cost {
        allocated_final: 0,
        allocated_resumable: 0,
        free_final: 0,
        free_resumable: 0,
    };

    pub(crate) fn plus(self, o: Cost) -> Cost {
        Cost {
            allocated_final: self.allocated_final + o.allocated_final,
            allocated_resumable: self.allocated_resumable + o.allocated_resumable,
            free_final: self.free_final + o.free_final,
            free_resumable: self.free_resumable + o.free_resumable,
        }
    }

    #[cfg(test)]
    pub(crate) fn free_resumable_for_tests(gpu_seconds: i64) -> Cost {
        Cost {
            free_resumable: gpu_seconds,
            ..Cost::ZERO
        }
    }

    fn of(spec: &WorkloadSpec, held: u32, ran: Time) -> Cost {
        let lost = i64::from(held) * ran.max(1);
        let mut cost = Cost::ZERO;
        match (spec.is_allocated(), spec.resumable) {
            (true, false) => cost.allocated_final = lost,
            (true, true) => {
                let past = ran - spec.min_runtime;
                cost.allocated_resumable = i64::from(held) * (7 * crate::ids::DAY - past).max(1);
            }
            (false, false) => cost.free_final = lost,
            (false, true) => cost.free_resumable = lost,
        }
        cost
    }
}

/// A running workload during the pass: those of the snapshot, then those started by it.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub spec: WorkloadSpec,
    pub started_at: Time,
    pub alive: bool,
    /// Started by this pass: never preempted by it.
    pub fresh: bool,
    /// The leaf's Fair-Tree rank (0 for the baseline, which does not rank).
    pub rank: u32,
    pub protected_until: Option<Time>,
    pub baseline_protected: bool,
    parts: (u32, u32),
    /// GPUs held on hosts that take new work: the only ones worth freeing.
    pub usable_gpus: u32,
    /// GPUs held in all.
    gpus: u32,
}

impl Run {
    pub(crate) fn is_protected(&self, now: Time) -> bool {
        self.protected_until.is_some_and(|until| now < until)
    }

    /// What preempting it at `now` would cost.
    pub(crate) fn cost(&self, now: Time) -> Cost {
        Cost::of(&self.spec, self.gpus, now - self.started_at)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub all: GpuSet,
    /// `all.count()`, looked up by every search.
    pub size: u32,
    pub free: GpuSet,
    pub health: Health,
    pub reservation: Option<u32>,
    pub reserved: GpuSet,
    /// What preempting here could gain at most, once a search has asked (see
    /// [`Pool::victim_gpus`]). Kept from pass to pass until the host changes.
    victim_gpus: Cell<Option<VictimGpus>>,
    /// The cost of the cheapest run that may be preempted here, once a search has asked in this
    /// pass (see [`Pool::cheapest_victim`]), with the pass's [`Pool::epoch`].
    cheapest_victim: Cell<Option<(u64, Option<Cost>)>>,
    /// Where this host's runs start in [`Pool::slot_runs`]' flat list, and how many there are.
    runs_at: u32,
    runs_len: u32,
}

impl Slot {
    pub(crate) fn schedulable(&self) -> bool {
        self.health.takes_new_work()
    }
}

/// The GPUs held on one host by the runs the policy might let anyone preempt (`victim_from` of
/// [`Pool::new`]), as of when a search first looked, and until when that holds: the moment the
/// next run there may be preempted. A pass's starts only add runs no one may preempt and its
/// releases only remove victims, so within the pass these stay a superset of what preempting there
/// could gain, whoever preempts: a search can skip a host they rule out without looking at its
/// runs. Every change of the host's runs drops them, so between passes they stay exact until
/// `until`, and a host's runs are read again only when it changed or a protection ended there.
#[derive(Clone, Copy, Debug)]
struct VictimGpus {
    gpus: GpuSet,
    until: Time,
}

/// Which request sizes fit on idle GPUs at one moment (as [`Pool::idle_could_fit`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdleFit {
    pub node_size: u32,
    /// The most idle GPUs on one schedulable host.
    pub max_idle: u32,
    /// Idle GPUs on wholly idle schedulable hosts.
    pub whole_idle: u32,
}

impl IdleFit {
    pub(crate) fn fits(self, gpus: u32) -> bool {
        if gpus <= self.node_size {
            gpus <= self.max_idle
        } else {
            gpus <= self.whole_idle
        }
    }
}

/// Which unallocated workloads fit idle GPUs at one moment. Free work that cannot resume starts
/// only while no allocated work waits (see `decide`'s `funded_waits`), so never beside a
/// reservation, which a waiting gang holds; resumable free work may backfill any reservation (its
/// minimum runtime is 0: DESIGN §4.8).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FreeFit {
    /// Every idle GPU.
    pub idle: IdleFit,
    /// Free work that cannot resume may start.
    pub fragile: bool,
}

impl FreeFit {
    pub(crate) fn fits(self, w: &WorkloadSpec) -> bool {
        (w.resumable || self.fragile) && self.idle.fits(w.gpus)
    }
}

/// A reservation as the pass sees it.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub workload: WorkloadId,
    /// The holder's queue position: work ahead of it may use its GPUs.
    pub key: QueueKey,
    pub at: Time,
    pub parts: Vec<NodeGpus>,
    pub live: bool,
}

pub(crate) struct Pool {
    pub now: Time,
    pub slots: Vec<Slot>,
    pub runs: Vec<Run>,
    parts: Vec<NodeGpus>,
    /// Every host's runs in one allocation: room for its snapshot runs plus one fresh run per GPU
    /// (fresh runs are never stopped within a pass, so a GPU takes at most one).
    slot_runs: Vec<(u32, GpuSet)>,
    pub held: Vec<Held>,
    /// The largest host's GPU count: bigger workloads are gangs of whole hosts.
    pub node_size: u32,
    idle_hist: [u32; 65],
    /// Schedulable hosts with an idle GPU, a bit each: searches on idle GPUs alone look only there.
    idle_hosts: Vec<u64>,
    /// Schedulable hosts whose every GPU is idle or held by a run someone may preempt, a bit each,
    /// as of the first gang search that preempts in this pass: the only hosts such a search can
    /// use. The pass's starts and releases only take hosts out (see [`VictimGpus`]), so the bits
    /// stay a superset of those hosts for the rest of the pass.
    gang_hosts: OnceCell<Vec<u64>>,
    /// What preempting could gather at most on each host, once a search read it (see [`bounds`]).
    bounds: Vec<Cell<bounds::Bound>>,
    /// Who holds GPUs on each host, once a search has asked (see [`Holders`]); kept from pass to
    /// pass until the host changes. Apart from the hosts, which a kept pool copies and puts back
    /// after a pass: a host the pass changed is read again.
    holders: Vec<OnceCell<Holders>>,
    /// More of who holds each host, set with `holders`.
    firsts: Vec<OnceCell<Firsts>>,
    /// Reserving gangs' outlooks, kept from pass to pass while the hosts they read stay as they
    /// were (see [`Outlooks`]).
    outlooks: RefCell<Outlooks>,
    pub idle_total: u32,
    pub whole_idle_gpus: u32,
    /// Live unallocated GPUs on schedulable hosts.
    pub free_work_gpus: u32,
    /// Live, unprotected, allocated GPUs on schedulable hosts, by leaf rank.
    pub unprotected_by_rank: Vec<u32>,
    /// Of those, the resumable ones: with idle GPUs and free work, what the fast lane can take.
    pub unprotected_resumable_gpus: u32,
    /// Live GPUs the baseline may preempt (not `baseline_protected`) on schedulable hosts.
    pub baseline_preemptible_gpus: u32,
    victim_from: fn(&Run) -> Option<Time>,
    /// Bumped by every change, so callers can cache what they learned about the pool.
    pub changes: u64,
    /// Bumped at every pass of a kept pool: what a pass learned of its hosts' cheapest victims is
    /// of that pass's epoch.
    epoch: u64,
    /// GPUs held by debug work when the pass began (the fast lane's share in use).
    pub debug_gpus: u32,
    /// This pass stopped resumable allocated work (it goes back to the queue).
    pub requeued_allocated: bool,
    /// The smallest resumable free workload this pass stopped.
    requeued_free: Option<u32>,
    /// `(changes, host)` for every host where something got easier: a preemption left idle GPUs
    /// behind, a reservation was dropped. Everything else a pass does only makes placement harder
    /// (a preemptor takes its victims' GPUs, fresh work is never preempted), so a search that
    /// failed need only look again at the hosts listed since.
    loosened: Vec<(u64, u32)>,
    /// Kept between passes (see [`kept`]): the pool as the pass began, to go back to after it.
    base: Option<kept::Base>,
}

/// The indices of the set bits of `words`, lowest first.
fn ones(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &bits)| {
        let mut bits = bits;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                w * 64 + b
            })
        })
    })
}

impl Pool {
    /// The pool for a pass at `now`. `victim_from` says from when on a run may be preempted by
    /// any search of the policy (`None`: never); it must be at or before `now` for every run any
    /// search of the pass may preempt (and may be for more), and depend on the run alone.
    pub(crate) fn new(
        state: &ClusterState<'_>,
        now: Time,
        ranks: usize,
        rank_of: impl Fn(BudgetId) -> u32,
        victim_from: fn(&Run) -> Option<Time>,
    ) -> Pool {
        // Size every vector once: a pass runs at every event, so regrowth would dominate.
        let mut per_node = vec![0usize; state.nodes.len()];
        let mut part_count = 0;
        for run in state.running {
            part_count += run.placement.parts.len();
            for part in &run.placement.parts {
                per_node[part.node.index()] += 1;
            }
        }
        let mut room = 0u32;
        let mut pool = Pool {
            now,
            slots: state
                .nodes
                .iter()
                .zip(&per_node)
                .map(|(n, &count)| {
                    let runs_at = room;
                    room += kept::room(count as u32, n.gpus);
                    Slot {
                        all: GpuSet::first(n.gpus),
                        size: n.gpus,
                        free: GpuSet::first(n.gpus),
                        health: n.health,
                        reservation: None,
                        reserved: GpuSet::EMPTY,
                        runs_at,
                        runs_len: 0,
                        victim_gpus: Cell::new(None),
                        cheapest_victim: Cell::new(None),
                    }
                })
                .collect(),
            runs: Vec::with_capacity(state.running.len() + 64),
            parts: Vec::with_capacity(part_count + 64),
            slot_runs: Vec::new(),
            held: Vec::new(),
            node_size: state.nodes.iter().map(|n| n.gpus).max().unwrap_or(0),
            idle_hist: [0; 65],
            idle_hosts: vec![0; state.nodes.len().div_ceil(64)],
            gang_hosts: OnceCell::new(),
            bounds: vec![Cell::new(bounds::Bound::UNKNOWN); state.nodes.len()],
            holders: vec![OnceCell::new(); state.nodes.len()],
            firsts: vec![OnceCell::new(); state.nodes.len()],
            outlooks: RefCell::new(Outlooks::default()),
            idle_total: 0,
            whole_idle_gpus: 0,
            free_work_gpus: 0,
            unprotected_by_rank: vec![0; ranks.max(1)],
            unprotected_resumable_gpus: 0,
            baseline_preemptible_gpus: 0,
            victim_from,
            changes: 0,
            epoch: 0,
            debug_gpus: 0,
            requeued_allocated: false,
            requeued_free: None,
            loosened: Vec::new(),
            base: None,
        };
        pool.slot_runs = vec![(0, GpuSet::EMPTY); room as usize];
        // One walk over the runs. Each host's runs are kept by workload id: the snapshot usually
        // lists them so, and a host that received one out of order is sorted afterwards.
        let mut last_id: Vec<Option<WorkloadId>> = vec![None; state.nodes.len()];
        let mut unsorted = false;
        for run in state.running {
            let at = pool.parts.len() as u32;
            let index = pool.runs.len() as u32;
            let mut gpus = 0;
            let mut usable_gpus = 0;
            for part in &run.placement.parts {
                let node = part.node.index();
                let slot = &mut pool.slots[node];
                slot.free = slot.free.without(part.gpus);
                pool.slot_runs[(slot.runs_at + slot.runs_len) as usize] = (index, part.gpus);
                slot.runs_len += 1;
                let count = part.gpus.count();
                gpus += count;
                if slot.schedulable() {
                    usable_gpus += count;
                }
                let last = &mut last_id[node];
                unsorted |= last.is_some_and(|id| id > run.spec.id);
                *last = Some(run.spec.id);
                pool.parts.push(*part);
            }
            if run.spec.is_debug() {
                pool.debug_gpus += gpus;
            }
            pool.runs.push(Run {
                spec: run.spec,
                started_at: run.started_at,
                alive: true,
                fresh: false,
                rank: rank_of(run.spec.leaf),
                protected_until: run.protected_until(),
                baseline_protected: run.baseline_protected,
                parts: (at, run.placement.parts.len() as u32),
                usable_gpus,
                gpus,
            });
            pool.count_run(index as usize, 1);
        }
        if unsorted {
            // The ids are read from a list of their own, not from the runs, which are far apart
            // in memory.
            let ids: Vec<WorkloadId> = state.running.iter().map(|r| r.spec.id).collect();
            for slot in &pool.slots {
                let at = slot.runs_at as usize;
                let runs = &mut pool.slot_runs[at..at + slot.runs_len as usize];
                if !runs.is_sorted_by_key(|&(run, _)| ids[run as usize]) {
                    runs.sort_unstable_by_key(|&(run, _)| ids[run as usize]);
                }
            }
        }
        for i in 0..pool.slots.len() {
            pool.count_idle(i, 1);
        }
        pool
    }

    fn usable_gpus_of(&self, run: u32) -> u32 {
        self.parts_of(run)
            .iter()
            .filter(|p| self.slots[p.node.index()].schedulable())
            .map(|p| p.gpus.count())
            .sum()
    }

    /// A superset of the GPUs preempting on host `node` could gain, whoever preempts (see
    /// [`VictimGpus`]): worked out when a search first asks after the host changed or a protection
    /// there ended, so a pass that preempts nowhere never pays for it.
    #[inline]
    pub(crate) fn victim_gpus(&self, node: usize) -> GpuSet {
        self.victims_until(node).0
    }

    /// As [`Pool::victim_gpus`], with the moment until which they hold.
    #[inline]
    pub(crate) fn victims_until(&self, node: usize) -> (GpuSet, Time) {
        match self.slots[node].victim_gpus.get() {
            Some(known) if self.now < known.until => (known.gpus, known.until),
            _ => self.find_victim_gpus(node),
        }
    }

    #[inline(never)]
    fn find_victim_gpus(&self, node: usize) -> (GpuSet, Time) {
        let slot = &self.slots[node];
        let mut known = VictimGpus {
            gpus: GpuSet::EMPTY,
            until: Time::MAX,
        };
        for &(run, held) in self.slot_runs(node) {
            let r = &self.runs[run as usize];
            if !r.alive || r.fresh {
                continue;
            }
            match (self.victim_from)(r) {
                Some(from) if from <= self.now => known.gpus = known.gpus.union(held),
                Some(from) => known.until = known.until.min(from),
                None => {}
            }
        }
        slot.victim_gpus.set(Some(known));
        (known.gpus, known.until)
    }

    /// A lower bound on the cost of preempting anything on host `node` in this pass, whoever
    /// preempts (`None`: nothing there may be): the cost of the cheapest run that may be, as of
    /// when a search first asked in this pass. Starts only add runs no one may preempt and
    /// releases only remove victims, so it stays a lower bound for the rest of the pass.
    pub(crate) fn cheapest_victim(&self, node: usize) -> Option<Cost> {
        let slot = &self.slots[node];
        if let Some((epoch, cheapest)) = slot.cheapest_victim.get() {
            if epoch == self.epoch {
                return cheapest;
            }
        }
        let cheapest = self
            .slot_runs(node)
            .iter()
            .map(|&(run, _)| &self.runs[run as usize])
            .filter(|r| r.alive && !r.fresh && (self.victim_from)(r).is_some_and(|t| t <= self.now))
            .map(|r| r.cost(self.now))
            .min();
        slot.cheapest_victim.set(Some((self.epoch, cheapest)));
        cheapest
    }

    /// Live and finished runs touching host `node`, with the GPUs they hold there, by workload id
    /// (snapshot runs), then in start order (runs started by this pass).
    pub(crate) fn slot_runs(&self, node: usize) -> &[(u32, GpuSet)] {
        let slot = &self.slots[node];
        let at = slot.runs_at as usize;
        &self.slot_runs[at..at + slot.runs_len as usize]
    }

    pub(crate) fn parts_of(&self, run: u32) -> &[NodeGpus] {
        let (at, len) = self.runs[run as usize].parts;
        &self.parts[at as usize..(at + len) as usize]
    }

    /// Counts host `node`'s GPUs in or out (`sign`) of the idle counters: called with -1 before
    /// every change of its GPUs or runs, and with 1 after it.
    fn count_idle(&mut self, node: usize, sign: i32) {
        if sign < 0 {
            self.touch(node);
        }
        let slot = &self.slots[node];
        if !slot.schedulable() {
            return;
        }
        let idle = slot.free.count();
        let whole = if slot.free == slot.all { slot.size } else { 0 };
        let apply = |v: &mut u32, by: u32| {
            *v = if sign > 0 { *v + by } else { *v - by };
        };
        apply(&mut self.idle_hist[idle as usize], 1);
        apply(&mut self.idle_total, idle);
        if sign > 0 {
            let (word, bit) = (node / 64, 1u64 << (node % 64));
            if idle > 0 {
                self.idle_hosts[word] |= bit;
            } else {
                self.idle_hosts[word] &= !bit;
            }
        }
        apply(&mut self.whole_idle_gpus, whole);
    }

    /// Called before every change of host `node` (its GPUs, runs or reservation): a pass taken
    /// back puts the host back, and what was learned of it goes.
    fn touch(&mut self, node: usize) {
        self.forget_bound(node);
        if let Some(base) = &mut self.base {
            base.touched(node);
        }
    }

    fn count_run(&mut self, run: usize, sign: i32) {
        let r = &self.runs[run];
        let gpus = r.usable_gpus;
        let apply = |v: &mut u32| {
            *v = if sign > 0 { *v + gpus } else { *v - gpus };
        };
        if !r.spec.is_allocated() {
            apply(&mut self.free_work_gpus);
        } else if !r.is_protected(self.now) {
            let rank = r.rank as usize;
            apply(&mut self.unprotected_by_rank[rank]);
            if r.spec.resumable {
                apply(&mut self.unprotected_resumable_gpus);
            }
        }
        if !r.baseline_protected {
            apply(&mut self.baseline_preemptible_gpus);
        }
    }

    /// Schedulable hosts with an idle GPU, ascending.
    pub(crate) fn hosts_with_idle(&self) -> impl Iterator<Item = usize> + '_ {
        ones(&self.idle_hosts)
    }

    /// Whether every GPU of host `node` is idle or held by a run someone may preempt: a gang
    /// that preempts can take it whole only then.
    pub(crate) fn gang_may_take(&self, node: usize) -> bool {
        let slot = &self.slots[node];
        slot.free.union(self.victim_gpus(node)) == slot.all
    }

    /// A superset of the hosts a gang search that preempts can use (see `gang_hosts`).
    pub(crate) fn gang_hosts(&self) -> impl Iterator<Item = usize> + '_ {
        let bits = self.gang_hosts.get_or_init(|| {
            let mut bits = vec![0u64; self.slots.len().div_ceil(64)];
            for (node, slot) in self.slots.iter().enumerate() {
                if slot.schedulable() && self.gang_may_take(node) {
                    bits[node / 64] |= 1 << (node % 64);
                }
            }
            bits
        });
        ones(bits)
    }

    /// The most idle GPUs on any schedulable host.
    pub(crate) fn max_idle(&self) -> u32 {
        (0..=self.node_size as usize)
            .rev()
            .find(|&c| self.idle_hist[c] > 0)
            .unwrap_or(0) as u32
    }

    /// Whether `gpus` could start on idle GPUs if no reservation stood in the way.
    pub(crate) fn idle_could_fit(&self, gpus: u32) -> bool {
        if gpus <= self.node_size {
            self.max_idle() >= gpus
        } else {
            self.whole_idle_gpus >= gpus
        }
    }

    /// [`Pool::idle_could_fit`] for every size at once, as of now.
    pub(crate) fn idle_fit(&self) -> IdleFit {
        IdleFit {
            node_size: self.node_size,
            max_idle: self.max_idle(),
            whole_idle: self.whole_idle_gpus,
        }
    }

    /// What unallocated work could start on idle GPUs now; work that cannot resume only if
    /// `fragile` (see [`FreeFit`]).
    pub(crate) fn free_fit(&self, fragile: bool) -> FreeFit {
        FreeFit {
            idle: self.idle_fit(),
            fragile,
        }
    }

    /// GPUs debug work could take at once: idle, free work, unprotected resumable work.
    pub(crate) fn lane_reach(&self) -> u32 {
        self.idle_total + self.free_work_gpus + self.unprotected_resumable_gpus
    }

    /// GPUs on hosts that take new work.
    pub(crate) fn schedulable_gpus(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| s.schedulable())
            .map(|s| s.size)
            .sum()
    }

    /// Whether the driver must decide again at once (see [`crate::Decision::decide_again`]): this
    /// pass requeued allocated work, or requeued free work that idle GPUs could take.
    pub(crate) fn decide_again(&self) -> bool {
        self.requeued_allocated || self.requeued_free.is_some_and(|g| self.idle_could_fit(g))
    }

    /// Stops a run and frees its GPUs.
    pub(crate) fn release(&mut self, run: u32) {
        let r = run as usize;
        if !self.runs[r].alive {
            return;
        }
        self.changes += 1;
        self.count_run(r, -1);
        self.runs[r].alive = false;
        if let Some(base) = &mut self.base {
            base.released(run);
        }
        let spec = self.runs[r].spec;
        if spec.resumable && spec.is_allocated() {
            self.requeued_allocated = true;
        } else if spec.resumable {
            self.requeued_free = Some(self.requeued_free.map_or(spec.gpus, |g| g.min(spec.gpus)));
        }
        let (at, len) = self.runs[r].parts;
        for k in at..at + len {
            let part = self.parts[k as usize];
            self.set_idle(part.node.index(), part.gpus, true);
        }
    }

    /// Marks `gpus` of host `node` idle or taken, keeping the counters: the one way its runs
    /// change (what was learned of them goes).
    fn set_idle(&mut self, node: usize, gpus: GpuSet, idle: bool) {
        self.slots[node].victim_gpus.set(None);
        self.forget_holders(node);
        if let Some(base) = &mut self.base {
            base.runs_changed(node);
        }
        self.count_idle(node, -1);
        let slot = &mut self.slots[node];
        slot.free = if idle {
            slot.free.union(gpus)
        } else {
            slot.free.without(gpus)
        };
        self.count_idle(node, 1);
    }

    /// Starts `spec` on `placement`, whose GPUs must be free.
    pub(crate) fn occupy(
        &mut self,
        spec: WorkloadSpec,
        rank: u32,
        placement: &Placement,
        baseline_protected: bool,
    ) {
        self.changes += 1;
        let index = self.runs.len() as u32;
        let at = self.parts.len() as u32;
        for part in &placement.parts {
            let node = part.node.index();
            debug_assert!(
                part.gpus.without(self.slots[node].free).is_empty(),
                "GPU taken twice"
            );
            self.set_idle(node, part.gpus, false);
            let slot = &mut self.slots[node];
            self.slot_runs[(slot.runs_at + slot.runs_len) as usize] = (index, part.gpus);
            slot.runs_len += 1;
            self.parts.push(*part);
        }
        self.runs.push(Run {
            spec,
            started_at: self.now,
            alive: true,
            fresh: true,
            rank,
            protected_until: spec.is_allocated().then_some(self.now + spec.min_runtime),
            baseline_protected,
            parts: (at, placement.parts.len() as u32),
            usable_gpus: 0,
            gpus: placement.gpu_count(),
        });
        self.runs[index as usize].usable_gpus = self.usable_gpus_of(index);
        self.count_run(index as usize, 1);
    }

    /// Holds `parts` for `workload` from now until `at`.
    pub(crate) fn reserve(
        &mut self,
        workload: WorkloadId,
        key: QueueKey,
        at: Time,
        parts: Vec<NodeGpus>,
    ) {
        self.changes += 1;
        let index = self.held.len() as u32;
        for part in &parts {
            let node = part.node.index();
            self.touch(node);
            let slot = &mut self.slots[node];
            slot.reservation = Some(index);
            slot.reserved = part.gpus;
        }
        self.held.push(Held {
            workload,
            key,
            at,
            parts,
            live: true,
        });
    }

    /// Drops the reservation held by `workload`, if any (it started after all).
    pub(crate) fn unreserve(&mut self, workload: WorkloadId) {
        let Some(index) = self
            .held
            .iter()
            .position(|h| h.live && h.workload == workload)
        else {
            return;
        };
        self.changes += 1;
        self.held[index].live = false;
        for k in 0..self.held[index].parts.len() {
            let node = self.held[index].parts[k].node;
            self.loosened.push((self.changes, node.0));
            if self.slots[node.index()].reservation == Some(index as u32) {
                self.touch(node.index());
                let slot = &mut self.slots[node.index()];
                slot.reservation = None;
                slot.reserved = GpuSet::EMPTY;
            }
        }
    }

    /// Notes that `node` has more idle GPUs than before (the pass's own bookkeeping decides when).
    pub(crate) fn mark_loosened(&mut self, node: NodeId) {
        self.loosened.push((self.changes, node.0));
    }

    /// Where the pool stands: its version and how many hosts got easier so far. Equal while
    /// nothing changed.
    pub(crate) fn stands(&self) -> (u64, usize) {
        (self.changes, self.loosened.len())
    }

    /// Whether placement got easier anywhere after version `since`.
    pub(crate) fn loosened_after(&self, since: u64) -> bool {
        self.loosened.last().is_some_and(|&(v, _)| v > since)
    }

    /// Appends to `nodes` (empty) the hosts where placement got easier after version `since`,
    /// ascending. Most failed searches are looked up again before anything loosened, so that case
    /// returns before searching or sorting.
    pub(crate) fn loosened_since(&self, since: u64, nodes: &mut Vec<usize>) {
        debug_assert!(nodes.is_empty());
        if self.loosened.last().is_none_or(|&(v, _)| v <= since) {
            return;
        }
        let from = self.loosened.partition_point(|&(v, _)| v <= since);
        nodes.extend(self.loosened[from..].iter().map(|&(_, n)| n as usize));
        nodes.sort_unstable();
        nodes.dedup();
    }

    /// GPUs of `node` a workload may use, given a test of whether it may backfill a reservation.
    pub(crate) fn usable(
        &self,
        node: usize,
        may_backfill: &(impl Fn(&Held) -> bool + ?Sized),
    ) -> GpuSet {
        let slot = &self.slots[node];
        match slot.reservation {
            Some(h) if !may_backfill(&self.held[h as usize]) => slot.all.without(slot.reserved),
            _ => slot.all,
        }
    }

    pub(crate) fn node_id(node: usize) -> NodeId {
        NodeId(node as u32)
    }
}
