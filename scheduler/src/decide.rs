//! The fair-share decision pass (DESIGN §4).
//!
//! Allocated work is bucketed by leaf rank in O(n); a bucket is sorted by priority and submit time
//! only when the scan reaches it, and whole buckets are skipped when counters show no member could
//! start; failed searches are remembered (see `memo`). Allocated work may take idle GPUs or
//! preempt; unallocated work only takes idle GPUs, after all allocated work, and is sorted only as
//! far as the idle GPUs last (see `queue::FreeQueue`). A blocked allocated workload near the head
//! reserves the GPUs it could have earliest (DESIGN §4.8).

use std::rc::Rc;

use crate::cluster::GpuSet;
use crate::engine::Engine;
use crate::explain::{blocked_reason, WaitReason};
use crate::health::drain_hosts;
use crate::ids::{NodeId, Time, WorkloadId};
use crate::memo::{bits_of, Failure, Failures};
use crate::placement::{Choice, Rules};
use crate::pool::{Held, Pool, Run};
use crate::queue::{FreeQueue, Queue, QueueKey};
use crate::ranking::Standings;
use crate::reasons::{
    Action, AfterStop, Decision, Party, PreemptReason, PreemptRule, Protection, Reservation,
};
use crate::snapshot::{ClusterState, WorkloadSpec};
use crate::tree::BudgetTree;

pub(crate) fn fair_share(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
) -> (Decision, Option<WaitReason>) {
    let standings = engine.standings(now);
    let ranks = standings.leaf_count();
    // Allocated work preempts unallocated work, and allocated work out of its protection.
    let pool = Pool::new(
        state,
        now,
        ranks,
        |leaf| standings.leaf_rank(leaf),
        |r, now| !r.spec.is_allocated() || !r.is_protected(now),
    );
    let mut pass = Pass {
        tree: engine.tree(),
        standings: &standings,
        margin: engine.config().damping_margin,
        max_reservations: engine.config().max_reservations,
        queued: state.queued,
        now,
        pool,
        actions: Vec::new(),
        wake: None,
        started: vec![false; state.queued.len()],
        wake_for: vec![false; ranks],
        blocked: false,
        leftover_after_block: false,
        attempts: 0,
        failures: Failures::new(ranks),
        nodes: Vec::new(),
        watch,
        watched: None,
    };
    let drain_wake = drain_hosts(
        &mut pass.pool,
        &|spec| party(&standings, spec),
        &|r: &Run| r.protected_until.filter(|&t| t > now),
        &mut pass.actions,
    );
    pass.wake_at(drain_wake);
    let mut queue = Queue::fair_share(state.queued, &standings);
    pass.scan_allocated(&mut queue);
    pass.scan_unallocated();
    pass.finish()
}

/// What the scan knows about one leaf's bucket of allocated work.
struct Group {
    rank: u32,
    /// By leaf rank: whose unprotected work this leaf may preempt.
    eligible: Vec<bool>,
    /// The same as a bit set, to compare with other leaves'.
    bits: Rc<[u64]>,
    reach: Option<(u64, u32)>,
    /// Its eligibility is already in `wake_for`.
    noted: bool,
}

struct Pass<'a> {
    tree: &'a BudgetTree,
    standings: &'a Standings,
    margin: f64,
    max_reservations: usize,
    queued: &'a [WorkloadSpec],
    now: Time,
    pool: Pool,
    actions: Vec<Action>,
    wake: Option<Time>,
    started: Vec<bool>,
    /// Leaf ranks whose running work some blocked workload may preempt once protection ends.
    wake_for: Vec<bool>,
    blocked: bool,
    leftover_after_block: bool,
    /// Blocked workloads that were offered a reservation (DESIGN §4.8), best-ranked first.
    attempts: usize,
    failures: Failures,
    /// Scratch: the hosts a covered request searches.
    nodes: Vec<usize>,
    watch: Option<WorkloadId>,
    watched: Option<WaitReason>,
}

impl Pass<'_> {
    fn wake_at(&mut self, t: Option<Time>) {
        if let Some(t) = t.filter(|&t| t > self.now) {
            self.wake = Some(self.wake.map_or(t, |w| w.min(t)));
        }
    }

    /// Allocated work, best first. Repeats while a preemption left idle GPUs behind after some
    /// better-ranked workload had been turned away, so free leftovers go to the best-ranked first.
    fn scan_allocated(&mut self, queue: &mut Queue) {
        loop {
            self.leftover_after_block = false;
            for rank in 0..queue.ranks() {
                if queue.group(rank).is_empty() {
                    continue;
                }
                let leaf = self.standings.leaves()[rank];
                let eligible = self.standings.preemptible_by(leaf, self.margin, self.tree);
                let mut group = Group {
                    rank: rank as u32,
                    bits: bits_of(&eligible),
                    eligible,
                    reach: None,
                    noted: false,
                };
                let watched_here = self.watch.is_some_and(|w| {
                    queue
                        .group(rank)
                        .iter()
                        .any(|&q| self.queued[q as usize].id == w)
                });
                let min_gpus = queue.min_gpus(rank);
                if self.attempts >= self.max_reservations
                    && !watched_here
                    && !self.pool.idle_could_fit(min_gpus)
                    && self.reachable(&mut group) < min_gpus
                {
                    self.note_blocked(&group.eligible);
                    continue;
                }
                for &q in queue.sorted_group(rank, self.queued) {
                    if !self.started[q as usize] {
                        self.try_allocated(q, &mut group);
                    }
                }
            }
            if !self.leftover_after_block {
                break;
            }
        }
    }

    /// Unallocated work on the idle GPUs allocated work left, in queue order.
    fn scan_unallocated(&mut self) {
        if self.pool.idle_total > 0 {
            let mut free = FreeQueue::new(self.queued, self.standings);
            while self.pool.idle_total > 0 {
                let Some((q, rank)) = free.next(self.pool.idle_fit(), self.pool.idle_total) else {
                    break;
                };
                self.try_idle_only(q, rank);
            }
        }
        if let Some(id) = self.watch {
            if self.watched.is_none() && self.queued.iter().any(|q| q.id == id && !q.is_allocated())
            {
                self.watched = Some(WaitReason::IdleOnly {
                    idle_gpus: self.pool.idle_total,
                });
            }
        }
    }

    /// Starts unallocated work on idle GPUs if a placement exists.
    fn try_idle_only(&mut self, q: u32, rank: u32) {
        let rules = Rules {
            may_backfill: &|_: &Held| true,
            victim: None,
            only: None,
        };
        if let Some(choice) = self.pool.find(self.queued[q as usize].gpus, &rules) {
            self.start(q, rank, choice);
        }
    }

    /// An upper bound on GPUs a workload of this group could gather by preempting: idle, free
    /// work, and unprotected work of leaves it may preempt. Cached until the pool changes.
    fn reachable(&self, group: &mut Group) -> u32 {
        if let Some((changes, reach)) = group.reach {
            if changes == self.pool.changes {
                return reach;
            }
        }
        let preemptible: u32 = self
            .pool
            .unprotected_by_rank
            .iter()
            .zip(&group.eligible)
            .filter(|(_, &e)| e)
            .map(|(g, _)| g)
            .sum();
        let reach = self.pool.idle_total + self.pool.free_work_gpus + preemptible;
        group.reach = Some((self.pool.changes, reach));
        reach
    }

    fn note_blocked(&mut self, eligible: &[bool]) {
        self.blocked = true;
        for (w, &e) in self.wake_for.iter_mut().zip(eligible) {
            *w |= e;
        }
    }

    fn may_backfill(&self, held: &Held, w: &WorkloadSpec, key: QueueKey) -> bool {
        held.workload == w.id
            || key < held.key
            || !w.is_allocated()
            || (self.now + w.min_runtime <= held.at
                && held.may_preempt[self.standings.leaf_rank(w.leaf) as usize])
    }

    fn try_allocated(&mut self, q: u32, group: &mut Group) {
        let w = self.queued[q as usize];
        let key = QueueKey::fair_share(&w, group.rank);
        let now = self.now;
        let gang = w.gpus > self.pool.node_size;
        let known = self
            .failures
            .latest_covering(group.rank, &group.bits, gang, w.gpus)
            .filter(|_| self.watch != Some(w.id));
        // The hosts worth searching when a failure covers this request; reused across attempts.
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes.clear();
        if let Some(f) = known {
            self.pool.loosened_since(f.at, &mut nodes);
            let before = nodes.len();
            for h in self.pool.held.iter().filter(|h| h.live) {
                if self.may_backfill(h, &w, key) && !self.may_backfill(h, &f.spec, f.key) {
                    nodes.extend(h.parts.iter().map(|p| p.node.index()));
                }
            }
            if nodes.len() > before {
                nodes.sort_unstable();
                nodes.dedup();
            }
        }
        // A gang can only gain the hosts that got easier since.
        let gang_reach =
            known.map(|f| f.reach + nodes.iter().map(|&n| self.pool.slots[n].size).sum::<u32>());
        let hopeless = if gang {
            gang_reach.is_some_and(|reach| reach < w.gpus)
        } else {
            known.is_some() && nodes.is_empty()
        };
        let choice = if hopeless {
            // A failure on record rules this request out, and no host loosened since it (else
            // a single-host request would search those hosts): recording this one as well would
            // add nothing, and would push older, more general failures out of the memo.
            Err(None)
        } else {
            let only = (known.is_some() && !gang).then_some(nodes.as_slice());
            self.search(&w, key, group, only)
        };
        self.nodes = nodes;
        let found = match choice {
            Ok(choice) => {
                self.start(q, group.rank, choice);
                return;
            }
            Err(found) => found,
        };
        if let Some((reach, everywhere)) = found {
            // A single-host search of only the loosened hosts learned nothing about the others,
            // which the covering failure still rules out from its own `from` on.
            let from = match known {
                Some(f) if !everywhere => (reach + 1).max(f.from),
                _ => reach + 1,
            };
            let failure = Failure {
                spec: w,
                key,
                gang,
                at: self.pool.changes,
                from: from.min(w.gpus),
                reach: if gang { reach } else { 0 },
            };
            self.failures.record(group.rank, failure, &group.bits);
        }
        // Once per group is enough: noting it again would OR the same leaves into `wake_for`.
        if !group.noted {
            group.noted = true;
            self.note_blocked(&group.eligible);
        }
        if self.attempts < self.max_reservations
            && !self.pool.held.iter().any(|h| h.live && h.workload == w.id)
        {
            self.attempts += 1;
            let eligible = &group.eligible;
            let eventually = |r: &Run| !r.spec.is_allocated() || eligible[r.rank as usize];
            if let Some((at, parts)) = self
                .pool
                .earliest(w.gpus, &eventually)
                .filter(|(at, _)| *at > now)
            {
                let may_preempt = group.eligible.clone();
                self.pool.reserve(w.id, key, at, parts, may_preempt);
                self.wake_at(Some(at));
            }
        }
        if self.watch == Some(w.id) {
            let reason = blocked_reason(&self.pool, &w, group.rank, &group.eligible, &|h| {
                self.may_backfill(h, &w, key)
            });
            self.watched = Some(reason);
        }
    }

    /// Idle GPUs first, then preemption, on `only` hosts if given. When nothing fits: an upper
    /// bound on the GPUs the request could gather on one host (see [`Failure::from`]), or for a
    /// gang on all the hosts it could use, and whether that bound holds for every host rather than
    /// only for those searched.
    fn search(
        &self,
        w: &WorkloadSpec,
        key: QueueKey,
        group: &mut Group,
        only: Option<&[usize]>,
    ) -> Result<Choice, Option<(u32, bool)>> {
        let now = self.now;
        let reach = self.reachable(group);
        let eligible = &group.eligible;
        let backfill = |h: &Held| self.may_backfill(h, w, key);
        let victim =
            |r: &Run| !r.spec.is_allocated() || (!r.is_protected(now) && eligible[r.rank as usize]);
        let idle = Rules {
            may_backfill: &backfill,
            victim: None,
            only,
        };
        if self.pool.idle_could_fit(w.gpus) {
            if let Some(choice) = self.pool.find(w.gpus, &idle) {
                return Ok(choice);
            }
        }
        if reach < w.gpus {
            return Err(Some((reach, true)));
        }
        let preempting = Rules {
            may_backfill: &backfill,
            victim: Some(&victim),
            only,
        };
        self.pool
            .find_or_reach(w.gpus, &preempting)
            .map_err(|reach| Some((reach, only.is_none())))
    }

    fn start(&mut self, q: u32, rank: u32, choice: Choice) {
        let w = self.queued[q as usize];
        let idle_before = self.pool.idle_total;
        let mut touched: Vec<(NodeId, GpuSet)> = Vec::new();
        for &victim in &choice.victims {
            for part in self.pool.parts_of(victim) {
                touched.push((part.node, self.pool.slots[part.node.index()].free));
            }
            let r = &self.pool.runs[victim as usize];
            let rule = if r.spec.is_allocated() {
                PreemptRule::FairShare {
                    split: self
                        .standings
                        .split(w.leaf, r.spec.leaf)
                        .expect("a leaf never preempts itself"),
                    margin: self.margin,
                }
            } else {
                PreemptRule::FreeWork
            };
            self.actions.push(Action::Preempt {
                workload: r.spec.id,
                reason: PreemptReason {
                    rule,
                    at: self.now,
                    preemptor: party(self.standings, &w),
                    victim: party(self.standings, &r.spec),
                    victim_started_at: r.started_at,
                    victim_min_runtime: r.spec.min_runtime,
                    victim_protected_until: r.protected_until,
                },
                then: AfterStop::after_preemption(r.spec.resumable),
            });
            self.pool.release(victim);
        }
        self.pool.unreserve(w.id);
        self.pool.occupy(w, rank, &choice.placement, false);
        for (node, free_before) in touched {
            if !self.pool.slots[node.index()]
                .free
                .without(free_before)
                .is_empty()
            {
                self.pool.mark_loosened(node);
            }
        }
        if self.blocked && self.pool.idle_total > idle_before {
            self.leftover_after_block = true;
        }
        if self.watch == Some(w.id) {
            self.watched = Some(WaitReason::StartsNow {
                placement: choice.placement.clone(),
            });
        }
        self.actions.push(Action::Start {
            workload: w.id,
            placement: choice.placement,
            protection: if w.is_allocated() {
                Protection::Until(self.now + w.min_runtime)
            } else {
                Protection::None
            },
        });
        self.started[q as usize] = true;
    }

    fn finish(mut self) -> (Decision, Option<WaitReason>) {
        if self.blocked {
            let soonest = self
                .pool
                .runs
                .iter()
                .filter(|r| r.alive && self.wake_for[r.rank as usize])
                .filter_map(|r| r.protected_until.filter(|&t| t > self.now))
                .min();
            self.wake_at(soonest);
        }
        let holds: Vec<Time> = self
            .pool
            .held
            .iter()
            .filter(|h| h.live)
            .map(|h| h.at)
            .collect();
        for at in holds {
            self.wake_at(Some(at));
        }
        let reservations = self
            .pool
            .held
            .iter()
            .filter(|h| h.live)
            .map(|h| Reservation {
                workload: h.workload,
                at: h.at,
                gpus: h.parts.clone(),
            })
            .collect();
        let decision = Decision {
            actions: self.actions,
            reservations,
            next_wake: self.wake,
        };
        (decision, self.watched)
    }
}

pub(crate) fn party(standings: &Standings, spec: &WorkloadSpec) -> Party {
    Party {
        workload: spec.id,
        leaf: spec.leaf,
        ratio: standings.ratio(spec.leaf),
        priority: spec.priority,
    }
}
