//! The fair-share decision pass (DESIGN §4).
//!
//! Allocated work is bucketed by leaf rank in O(n); a bucket is sorted by priority and submit time
//! only when the scan reaches it, and whole buckets are skipped when counters show no member could
//! start; failed searches are remembered (see `memo`). Allocated work may take idle GPUs or
//! preempt; unallocated work only takes idle GPUs, after all allocated work, and is sorted only as
//! far as the idle GPUs last (see `queue::FreeQueue`). A blocked allocated workload near the head
//! reserves the GPUs it could have earliest (DESIGN §4.8).

use std::cell::Cell;
use std::cmp::Ordering;
use std::rc::Rc;

use crate::cluster::{GpuSet, NodeGpus};
use crate::engine::{Config, Engine};
use crate::explain::{blocked_reason, WaitReason};
use crate::health::drain_hosts;
use crate::ids::{BudgetId, NodeId, Time, WorkloadId};
use crate::lineup::{Brief, Lineup, Shape};
use crate::memo::{Failure, Failures};
use crate::placement::{Choice, Rules, IDLE_ONLY};
use crate::pool::{Blockers, Build, Held, Pool, Run};
use crate::queue::{leaf_order, FreeOrder, FreeQueue, Queue, QueueKey};
use crate::ranking::Standings;
use crate::reasons::{
    Action, AfterStop, Decision, Party, PreemptReason, PreemptRule, Protection, Reservation,
};
use crate::ruled_out::{SameBackfill, Verdict, Verdicts};
use crate::snapshot::{Changes, ClusterState, WorkloadSpec, DEBUG_MAX_GPUS};
use crate::tree::BudgetTree;

pub(crate) fn fair_share(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    fair_share_with(engine, state, now, watch, Shortcuts::On, changes)
}

/// Whether the pass skips searches whose outcome it already knows changes nothing (requests the
/// headroom holds back: see [`HeldBack`] and `Pass::headroom_holds`). `Off` is the
/// reference the property tests hold the pass to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shortcuts {
    On,
    #[cfg_attr(not(feature = "full-walk"), allow(dead_code))]
    Off,
}

pub(crate) fn fair_share_with(
    engine: &Engine,
    state: &ClusterState<'_>,
    now: Time,
    watch: Option<WorkloadId>,
    shortcuts: Shortcuts,
    changes: Option<&Changes<'_>>,
) -> (Decision, Option<WaitReason>) {
    let standings = engine.pass_standings(now);
    let ranks = standings.leaf_count();
    // Allocated work preempts unallocated work, and allocated work out of its protection.
    let build = Build {
        ranks,
        rank_of: |leaf| standings.leaf_rank(leaf),
        order: standings.leaves(),
        victim_from: |r| Some(r.protected_until.unwrap_or(Time::MIN)),
    };
    let pool = engine.pool_for_pass(state, now, build, changes);
    // The fast lane's room: its cap on the schedulable GPUs, less what debug work holds already.
    let schedulable = pool.schedulable_gpus();
    // On a small cluster a tenth may not hold even one debug workload: the lane always has room
    // for the largest one (unless it is off).
    let fast_lane = engine.config().fast_lane;
    let lane_share = (fast_lane * f64::from(schedulable)).floor() as u32;
    let lane_cap = if fast_lane > 0.0 {
        lane_share.max(DEBUG_MAX_GPUS).min(schedulable)
    } else {
        0
    };
    let debug_running = pool.debug_gpus;
    // The cap is a share per window (DESIGN §4.11): while the lane's use averaged over the
    // window is under it, debug work may hold up to the peak at once.
    let lane = lane_window(
        engine.config(),
        state,
        now,
        lane_cap,
        schedulable,
        debug_running,
    );
    // The headroom never exceeds the lane's own share (without its one-workload floor): a
    // cluster too small for a tenth to hold a GPU keeps none. Nor a small fraction of the
    // cluster: funded work pays for it.
    let headroom_cap = (engine.config().headroom_max_fraction * f64::from(schedulable)).floor();
    let headroom = lane_share
        .saturating_sub(debug_running)
        .min(engine.config().headroom_gpus)
        .min(headroom_cap as u32);
    let lineup = changes.map(|changes| engine.lineup(state.queued, changes, pool.node_size));
    let mut scratch = std::mem::take(&mut *engine.scratch());
    scratch.started.clear();
    scratch.started.resize(state.queued.len(), false);
    scratch.wake_for.clear();
    scratch.wake_for.resize(ranks, false);
    let mut pass = Pass {
        lineup: lineup.as_deref(),
        briefs: lineup.as_deref().map(Lineup::briefs),
        headroom,
        held_by_headroom: false,
        reserve_cap: (engine.config().max_reserved_fraction * f64::from(schedulable)).floor()
            as u32,
        lane_room: lane.cap.saturating_sub(debug_running),
        lane_may_open: lane.may_open,
        lane_turned_away: false,
        tree: engine.tree(),
        standings: &standings,
        margin: engine.config().damping_margin,
        kill_margin: engine
            .config()
            .kill_margin
            .max(engine.config().damping_margin),
        max_reservations: engine.config().max_reservations,
        queued: state.queued,
        now,
        pool,
        actions: Vec::new(),
        wake: None,
        started: scratch.started,
        wake_for: scratch.wake_for,
        blocked: false,
        leftover_after_block: false,
        attempts: 0,
        failures: Failures::in_lists(scratch.failure_lists, ranks),
        nodes: Vec::new(),
        outlook_hosts: scratch.outlook_hosts,
        watch,
        watched: None,
        shortcuts,
        victim_words: Cell::new(Vec::new()),
    };
    let drain_wake = drain_hosts(
        &mut pass.pool,
        &|spec| party(&standings, spec),
        &|r: &Run| r.protected_until.filter(|&t| t > now),
        &mut pass.actions,
    );
    pass.wake_at(drain_wake);
    let mut queue = match pass.lineup {
        Some(lineup) => {
            let queue = Queue::from_lineup(scratch.queue, lineup, &standings);
            #[cfg(debug_assertions)]
            queue.assert_as_built(state.queued, &standings, lineup);
            queue
        }
        None => Queue::fair_share(state.queued, &standings),
    };
    pass.scan_lane(queue.debug());
    pass.scan_allocated(&mut queue);
    pass.scan_unallocated();
    let (decision, watched, pool, mut kept) = pass.finish();
    kept.queue = queue;
    *engine.scratch() = kept;
    engine.keep_pool(pool, changes);
    engine.keep_standings(standings);
    (decision, watched)
}

/// Whose unprotected work one leaf may preempt, by leaf rank: resumable work (`eligible`), and
/// work whose progress a preemption ends (`kill`, behind the wider kill margin: a subset). Both in
/// one bit set, `eligible` by rank then `kill` by rank, which the failures on record compare
/// leaves by (see `memo`).
struct Victims {
    bits: Rc<[u64]>,
    ranks: usize,
}

impl Victims {
    fn of(leaf: BudgetId, pass: &Pass<'_>) -> Victims {
        let ranks = pass.standings.leaf_count();
        let mut words = pass.victim_words.take();
        words.clear();
        words.resize((2 * ranks).div_ceil(64), 0);
        let mut set = |from: usize, lo: u32, hi: u32| {
            for i in from + lo as usize..from + hi as usize {
                words[i / 64] |= 1 << (i % 64);
            }
        };
        let (standings, tree) = (pass.standings, pass.tree);
        standings.preemptible_ranges(leaf, pass.margin, tree, |lo, hi| set(0, lo, hi));
        standings.preemptible_ranges(leaf, pass.kill_margin, tree, |lo, hi| set(ranks, lo, hi));
        let bits = Rc::from(&words[..]);
        pass.victim_words.set(words);
        Victims { bits, ranks }
    }

    fn bit(&self, i: usize) -> bool {
        self.bits[i / 64] & 1 << (i % 64) != 0
    }

    /// Whether fair share lets this leaf preempt resumable work of leaf rank `rank` once its
    /// protection has ended.
    fn eligible(&self, rank: usize) -> bool {
        rank < self.ranks && self.bit(rank)
    }

    /// The same for work that cannot resume.
    fn kill(&self, rank: usize) -> bool {
        rank < self.ranks && self.bit(self.ranks + rank)
    }

    /// Whether it may kill work of any leaf.
    fn kills_any(&self) -> bool {
        (0..self.ranks).any(|rank| self.kill(rank))
    }

    /// Whether fair share lets this leaf preempt `r` once its protection has ended.
    fn may_take(&self, r: &Run) -> bool {
        if r.spec.resumable {
            self.eligible(r.rank as usize)
        } else {
            self.kill(r.rank as usize)
        }
    }

    /// Whether a gang of this leaf with queue key `key` may take allocated run `r` once its
    /// protection ends: fair share lets it, or `r` can resume and is behind it in the queue.
    fn behind(&self, r: &Run, key: QueueKey) -> bool {
        r.spec.is_allocated()
            && (self.may_take(r)
                || (r.spec.resumable && QueueKey::fair_share(&r.spec, r.rank) > key))
    }

    /// `try_reserving`'s `eventually` for `gang` of this leaf, of rank `rank`, as the leaves whose
    /// work it may never take: work that cannot resume, unless it may be killed; resumable work,
    /// unless it may be preempted or is behind the gang in the queue (work of a later rank, or of
    /// its own leaf and behind it there).
    fn blockers(&self, gang: &WorkloadSpec, rank: u32, standings: &Standings) -> Blockers {
        let mut blockers = Blockers::default();
        for (r, &leaf) in standings.leaves().iter().enumerate() {
            let Some(bit) = Blockers::bit(leaf) else {
                continue;
            };
            if !self.kill(r) {
                blockers.final_leaves |= bit;
            }
            if !self.eligible(r) {
                match (r as u32).cmp(&rank) {
                    Ordering::Less => blockers.resumable_leaves |= bit,
                    Ordering::Equal => blockers.own = Some((bit, leaf_order(gang))),
                    Ordering::Greater => {}
                }
            }
        }
        blockers
    }

    /// Both sets as one bit set, to compare with other leaves' (see `memo`).
    fn bits(&self) -> Rc<[u64]> {
        Rc::clone(&self.bits)
    }
}

/// What the scan knows of a group's allocated work as a whole (see `Pass::singles_wait`).
struct RestOfGroup {
    min_gpus: u32,
    /// The shortest minimum runtime among its resumable work (`Time::MAX` if none).
    shortest_resumable: Time,
}

/// What the scan knows about one leaf's bucket of allocated work.
struct Group {
    rank: u32,
    /// By leaf rank: whose unprotected work this leaf may preempt.
    victims: Victims,
    /// The same as a bit set, to compare with other leaves'.
    bits: Rc<[u64]>,
    /// It may kill work of some leaf (see [`Victims::kill`]).
    kills: bool,
    reach: Option<(u64, u32)>,
    /// Its eligibility is already in `wake_for`.
    noted: bool,
    /// A gang of the group that could never start (`try_reserving`) without holding a
    /// reservation: its GPUs, and the pool's version then.
    never: Option<(u32, u64)>,
    /// The group's latest requests held back by the headroom, newest first (see [`HeldBack`]).
    held_back: HeldBackList,
    /// Which of its single-host requests the failures on record rule out, by size.
    verdicts: Verdicts,
}

/// A request that found a placement but was held back by the fast lane's headroom, and what its
/// search depended on. Holding back starts nothing, so while the pool is as it was (`at`), a later
/// request of the group (the same victims) for as many GPUs, with the same reserved hosts open to
/// it and searching the same hosts, finds the same placement and is held back too: a long queue
/// of equal requests waiting for the headroom costs one search, not one each.
struct HeldBack {
    at: u64,
    gpus: u32,
    /// Bit `i`: it may start on the GPUs `pool.held[i]` reserves (see [`Pass::may_backfill`]).
    backfill: u64,
    /// The hosts it searched, if not all.
    only: Option<Vec<usize>>,
    /// The failures on record then: a later request of its size finds the same one.
    recorded: u64,
    /// Which later requests have the same reservations open to them, told without a walk.
    same_backfill: SameBackfill,
}

/// What a group's walk learned of the work that waits, so that it passes over such work without
/// a visit, while the pool and the failures on record stand as they did then (see
/// [`Waits`]): its single-host work that is not debug work, and its gangs.
#[derive(Default)]
struct WaitFrom {
    stands: Option<Stands>,
    singles: Waits,
    gangs: Waits,
}

/// The pool's version and count of hosts that got easier, and the count of failures on record.
type Stands = ((u64, usize), u64);

impl WaitFrom {
    /// Forgets what was learned before the pool or the failures on record last changed.
    fn stands(&mut self, stands: Stands) {
        if self.stands != Some(stands) {
            *self = WaitFrom {
                stands: Some(stands),
                ..WaitFrom::default()
            };
        }
    }

    /// Whether work of `shape` is known to wait at `now` (what [`Bars`] tells faster).
    fn passes(&self, shape: &Shape, now: Time) -> bool {
        match (shape.debug, shape.gang) {
            (true, _) => false,
            (false, false) => self.singles.passes(shape, now),
            (false, true) => self.gangs.passes(shape, now),
        }
    }

    /// What is known at `now`, as the bars a shape passes.
    fn bars(&self, now: Time) -> Bars {
        let (singles, gangs) = (self.singles.bar(now), self.gangs.bar(now));
        Bars {
            from: [singles.0, gangs.0],
            over: [singles.1, gangs.1],
        }
    }

    /// What is known of work of `shape`'s kind, if it is one a walk may pass over.
    fn of(&mut self, shape: &Shape) -> Option<&mut Waits> {
        match (shape.debug, shape.gang) {
            (true, _) => None,
            (false, false) => Some(&mut self.singles),
            (false, true) => Some(&mut self.gangs),
        }
    }
}

/// Of one kind of a group's work: every request from `from` GPUs up waits unless it can resume
/// with a minimum runtime that ends by `unless_by`. Sizes up to `not_from` were found not to,
/// and are not asked about again.
#[derive(Default)]
struct Waits {
    from: Option<u32>,
    unless_by: Option<Time>,
    not_from: Option<u32>,
}

/// [`WaitFrom`] at one moment, read the same way for both kinds (index 0: single-host work, 1:
/// gangs): work of the kind waits if it asks for `from` GPUs or more and its `resumable_min`
/// exceeds `over`. Debug work never passes.
#[derive(Clone, Copy)]
struct Bars {
    from: [u64; 2],
    over: [Time; 2],
}

impl Bars {
    fn passes(&self, shape: &Shape) -> bool {
        let kind = usize::from(shape.gang);
        !shape.debug
            && u64::from(shape.gpus) >= self.from[kind]
            && shape.resumable_min > self.over[kind]
    }
}

impl Waits {
    /// [`Bars`]' two figures for this kind at `now`. A minimum runtime `min` (never negative)
    /// ends by `by` unless `now + min > by` (saturating), that is unless `min > by - now`; a
    /// reservation of `Time::MAX` is never reached, so then nothing exceeds the bar.
    fn bar(&self, now: Time) -> (u64, Time) {
        let from = self.from.map_or(u64::MAX, u64::from);
        let over = match self.unless_by {
            None => Time::MIN,
            Some(Time::MAX) => Time::MAX,
            Some(by) => by.saturating_sub(now),
        };
        (from, over)
    }

    fn passes(&self, shape: &Shape, now: Time) -> bool {
        self.from.is_some_and(|from| shape.gpus >= from)
            && self
                .unless_by
                .is_none_or(|by| now.saturating_add(shape.resumable_min) > by)
    }

    fn worth_asking(&self, gpus: u32) -> bool {
        self.from.is_none_or(|from| gpus < from) && self.not_from.is_none_or(|not| gpus > not)
    }

    fn learn(&mut self, gpus: u32, wait: Option<Option<Time>>) {
        match wait {
            Some(unless_by) => {
                self.from = Some(gpus);
                self.unless_by = unless_by;
            }
            None => self.not_from = Some(self.not_from.map_or(gpus, |not| not.max(gpus))),
        }
    }
}

/// Group `rank`'s members, of `leaf`: in queue order as the lineup keeps them, else the queue's
/// bucket (sorted when a scan reaches it: see [`Queue::sorted_group`]).
fn members<'q>(
    lineup: Option<&'q Lineup>,
    queue: &'q Queue,
    leaf: BudgetId,
    rank: usize,
) -> &'q [u32] {
    match lineup {
        Some(lineup) => lineup.allocated(leaf),
        None => queue.group(rank),
    }
}

/// A group's latest requests held back by the headroom, newest first: two, so that a queue
/// whose requests alternate between sizes, or between work that may use a reservation and work
/// that may not, finds its kind among them rather than searching again for each one.
#[derive(Default)]
struct HeldBackList(Vec<HeldBack>);

impl HeldBackList {
    /// How many are kept.
    const KEPT: usize = 2;

    /// Keeps `record`, the newest, with those of the same pool version; `None` (too many
    /// reservations to say which it may use) forgets them all.
    fn keep(&mut self, record: Option<HeldBack>) {
        let Some(record) = record else {
            self.0.clear();
            return;
        };
        self.0.retain(|h| {
            h.at == record.at
                && (h.gpus, h.backfill, &h.only) != (record.gpus, record.backfill, &record.only)
        });
        self.0.insert(0, record);
        self.0.truncate(HeldBackList::KEPT);
    }
}

struct Pass<'a> {
    /// GPUs other allocated work must leave within the fast lane's reach (DESIGN §4.11).
    headroom: u32,
    /// Some workload waits only for the headroom: it grows when resumable work's protection ends.
    held_by_headroom: bool,
    /// GPUs reservations may hold together (beyond the first).
    reserve_cap: u32,
    /// GPUs debug work may still take through the fast lane in this pass.
    lane_room: u32,
    /// The lane is held to its share because its use over the window reached it: as the window
    /// slides, it may open up to its peak again without any event.
    lane_may_open: bool,
    /// Debug work waited for the lane's room this pass.
    lane_turned_away: bool,
    tree: &'a BudgetTree,
    standings: &'a Standings,
    margin: f64,
    /// The damping margin for work a preemption would end (`Config::kill_margin`).
    kill_margin: f64,
    max_reservations: usize,
    queued: &'a [WorkloadSpec],
    now: Time,
    pool: Box<Pool>,
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
    /// Scratch: the hosts a reserving gang could have (see `Pool::gang_outlook`).
    outlook_hosts: Vec<(Time, usize, GpuSet)>,
    watch: Option<WorkloadId>,
    watched: Option<WaitReason>,
    shortcuts: Shortcuts,
    /// Fair share's queue kept between passes, for a driver that names its changes.
    lineup: Option<&'a Lineup>,
    /// The lineup's briefs of the queue, by queue index.
    briefs: Option<&'a [Brief]>,
    /// Scratch for [`Victims::of`].
    victim_words: Cell<Vec<u64>>,
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
                let leaf = self.standings.leaves()[rank];
                let lineup = self.lineup;
                if members(lineup, queue, leaf, rank).is_empty() {
                    continue;
                }
                let victims = Victims::of(leaf, self);
                let mut group = Group {
                    rank: rank as u32,
                    bits: victims.bits(),
                    kills: victims.kills_any(),
                    victims,
                    reach: None,
                    noted: false,
                    never: None,
                    held_back: HeldBackList::default(),
                    verdicts: Verdicts::default(),
                };
                let min_gpus = queue.min_gpus(rank);
                // Nothing of this group can start now; only its gangs may still reserve (and,
                // holding a reservation, take work behind them). Explaining a workload of the
                // group changes nothing of this: its reason is worked out on the side.
                let hopeless =
                    !self.pool.idle_could_fit(min_gpus) && self.reachable(&mut group) < min_gpus;
                if hopeless {
                    let members = members(lineup, queue, leaf, rank);
                    // Debug work the lane started, and work started before a rescan, waits no more.
                    if members.iter().all(|&q| self.started[q as usize]) {
                        continue;
                    }
                    let watched = self.watch.and_then(|id| {
                        members.iter().copied().find(|&q| {
                            !self.started[q as usize] && self.queued[q as usize].id == id
                        })
                    });
                    if watched.is_some() {
                        self.watched = None;
                    }
                    self.note_blocked(&group.victims);
                    group.noted = true;
                    if queue.max_gpus(rank) > self.pool.node_size
                        && self.attempts < self.max_reservations
                    {
                        let special = lineup.map(|lineup| lineup.special(leaf));
                        self.scan_gangs(members, special, &mut group);
                    }
                    if let Some(q) = watched.filter(|_| self.watched.is_none()) {
                        let w = self.queued[q as usize];
                        self.explain_blocked(&w, QueueKey::fair_share(&w, group.rank), &group);
                    }
                    continue;
                }
                // The same for a whole group of single-host work none of which is debug work
                // (see `headroom_holds`): it is not even sorted.
                let watched = |q: &u32| self.watch == Some(self.queued[*q as usize].id);
                if self.headroom_holds(min_gpus, &group)
                    && queue.debug_count(rank) == 0
                    && queue.max_gpus(rank) <= self.pool.node_size
                    && (self.watch.is_none()
                        || !members(lineup, queue, leaf, rank).iter().any(watched))
                {
                    self.note_group(&mut group);
                    continue;
                }
                let rest = RestOfGroup {
                    min_gpus,
                    shortest_resumable: queue.shortest_resumable(rank),
                };
                let (members, shapes, special) = match lineup {
                    Some(lineup) => (
                        lineup.allocated(leaf),
                        Some(lineup.shapes(leaf)),
                        Some(lineup.special(leaf)),
                    ),
                    None => (queue.sorted_group(rank, self.queued), None, None),
                };
                self.scan_group(members, shapes, special, &rest, &mut group);
            }
            if !self.leftover_after_block {
                break;
            }
        }
    }

    /// A group's work in queue order. Once the rest of the group's single-host work that is not
    /// debug work would be left waiting one by one, only its gangs and debug work are taken until
    /// something changes that, when the rest is taken again from there: when a failure on record
    /// rules out the rest of its single-host work (`singles_wait`), or the headroom holds it back
    /// (`headroom_holds`). `special` is the group's gangs and debug work in queue order, if kept.
    /// Short of that, work of a kind and size known to wait is passed over unread (see
    /// [`WaitFrom`]); `shapes` are the members' shapes, if kept.
    fn scan_group(
        &mut self,
        members: &[u32],
        shapes: Option<&[Shape]>,
        special: Option<&[u32]>,
        rest: &RestOfGroup,
        group: &mut Group,
    ) {
        let rank = group.rank;
        let key_of =
            |queued: &[WorkloadSpec], q: u32| QueueKey::fair_share(&queued[q as usize], rank);
        let node_size = self.pool.node_size;
        let queued = self.queued;
        let is_special = |g: u32| crate::lineup::special(&queued[g as usize], node_size);
        debug_assert!(special.is_none_or(|special| special
            .iter()
            .copied()
            .eq(members.iter().copied().filter(|&g| is_special(g)))));
        let mut built: Option<Vec<u32>> = None;
        let shape_at = |i: usize| match shapes {
            Some(shapes) => shapes[i],
            None => Shape::of(&queued[members[i] as usize], node_size),
        };
        let mut wait_from = WaitFrom::default();
        let mut i = 0;
        loop {
            let (bars, holding) = self.bars(&mut wait_from);
            while i < members.len() && self.passes_over(&bars, holding, &shape_at(i), members[i]) {
                debug_assert!(wait_from.passes(&shape_at(i), self.now));
                i += 1;
            }
            let Some(&q) = members.get(i) else {
                break;
            };
            i += 1;
            if self.started[q as usize] {
                continue;
            }
            let settled = self.settled_without_a_try(q, group);
            let waits = if settled {
                None
            } else {
                self.try_allocated(q, group)
            };
            let hand_over = waits.is_some_and(|key| self.singles_wait(rest, key, group))
                || self.headroom_holds_singles(rest, group);
            if !hand_over {
                if settled || shape_at(i - 1).gang {
                    self.learn_waits(q, &shape_at(i - 1), &mut wait_from, group);
                }
                continue;
            }
            let key = key_of(queued, q);
            let special = match special {
                Some(special) => special,
                None => built.get_or_insert_with(|| {
                    members.iter().copied().filter(|&g| is_special(g)).collect()
                }),
            };
            let from = special.partition_point(|&g| key_of(queued, g) <= key);
            let mut resume = None;
            for &g in &special[from..] {
                if self.started[g as usize] {
                    continue;
                }
                let shape = Shape::of(&queued[g as usize], node_size);
                let (bars, holding) = self.bars(&mut wait_from);
                if !self.passes_over(&bars, holding, &shape, g)
                    && !self.settled_without_a_try(g, group)
                {
                    self.try_allocated(g, group);
                    if shape.gang {
                        self.learn_waits(g, &shape, &mut wait_from, group);
                    }
                }
                let key = key_of(queued, g);
                if !self.singles_wait(rest, key, group) && !self.headroom_holds_singles(rest, group)
                {
                    resume = Some(key);
                    break;
                }
            }
            match resume {
                Some(key) => i = members.partition_point(|&m| key_of(queued, m) <= key),
                None => break,
            }
        }
    }

    /// What `wait_from` knows as the pool and the failures on record stand now, as bars, and
    /// whether some reservation is live (see `passes_over`).
    fn bars(&self, wait_from: &mut WaitFrom) -> (Bars, bool) {
        wait_from.stands((self.pool.stands(), self.failures.recorded()));
        let holding = self.pool.held.iter().any(|h| h.live);
        (wait_from.bars(self.now), holding)
    }

    /// Whether the walk passes over workload `q` of `shape`, known to wait (see [`WaitFrom`]); a
    /// gang holding a reservation (`holding`: some reservation is live) is always looked at.
    fn passes_over(&self, bars: &Bars, holding: bool, shape: &Shape, q: u32) -> bool {
        bars.passes(shape) && !(shape.gang && holding && self.holds(q))
    }

    /// Whether workload `q` holds a reservation.
    fn holds(&self, q: u32) -> bool {
        let id = self.queued[q as usize].id;
        self.pool.held.iter().any(|h| h.live && h.workload == id)
    }

    /// Learns, after a visit that left `q` (of `shape`) waiting, whether the rest of the group's
    /// work of its kind and size or larger waits too (see [`WaitFrom`]).
    fn learn_waits(&self, q: u32, shape: &Shape, wait_from: &mut WaitFrom, group: &Group) {
        if self.watch.is_some() || self.started[q as usize] {
            return;
        }
        wait_from.stands((self.pool.stands(), self.failures.recorded()));
        let Some(waits) = wait_from
            .of(shape)
            .filter(|waits| waits.worth_asking(shape.gpus))
        else {
            return;
        };
        let key = QueueKey::fair_share(&self.queued[q as usize], group.rank);
        let wait = if shape.gang {
            self.gangs_wait_unless(shape.gpus, key, group)
        } else if self.headroom_holds(shape.gpus, group) {
            Some(None)
        } else {
            self.singles_wait_unless(shape.gpus, key, group)
        };
        waits.learn(shape.gpus, wait);
    }

    /// Whether every gang of the group after `key` asking for `gpus` or more would be left
    /// waiting, unless it can resume and its minimum runtime ends by the time returned, if any
    /// (`None` if not so; gangs holding a reservation are visited all the same): no reservation is
    /// left to offer; a failure on
    /// record could reach fewer GPUs, and no host got easier since; and every reservation it could
    /// not use is held by work ahead of them, so that they may use it only by backfilling it.
    fn gangs_wait_unless(&self, gpus: u32, key: QueueKey, group: &Group) -> Option<Option<Time>> {
        if self.shortcuts != Shortcuts::On
            || self.watch.is_some()
            || self.attempts < self.max_reservations
        {
            return None;
        }
        let f = self
            .failures
            .latest_covering(group.rank, &group.bits, true, gpus)?;
        if f.reach >= gpus || self.pool.loosened_after(f.at) {
            return None;
        }
        self.reserved_ahead_of(key, |h| self.may_backfill(h, &f.spec, f.key))
    }

    /// Whether every live reservation but those `open` to the work is held by work ahead of
    /// `key`, which work at `key` may then use only by backfilling it: if so, the latest of them
    /// (`Some(None)` if none), by when such work's minimum runtime must end; else `None`.
    fn reserved_ahead_of(
        &self,
        key: QueueKey,
        open: impl Fn(&Held) -> bool,
    ) -> Option<Option<Time>> {
        let mut unless_by = None;
        for h in self.pool.held.iter().filter(|h| h.live) {
            if open(h) {
                continue;
            }
            if h.key > key {
                return None;
            }
            unless_by = Some(unless_by.map_or(h.at, |by: Time| by.max(h.at)));
        }
        Some(unless_by)
    }

    /// Whether the headroom holds back every single-host request of the group that is not debug
    /// work (see `headroom_holds`), so that a walk need not visit them one by one.
    fn headroom_holds_singles(&self, rest: &RestOfGroup, group: &Group) -> bool {
        self.watch.is_none() && self.headroom_holds(rest.min_gpus, group)
    }

    /// Whether every single-host workload of the group after `key` would be left waiting without
    /// a search, as the pass would find one by one: a failure on record for the group rules out
    /// requests as small as its smallest, no host got easier since, and no reserved host is worth
    /// a search for any of them. A reserved host is not when each of them is behind its holder in
    /// the queue and either not resumable or with a minimum runtime that ends after the
    /// reservation's time; or when the failure they all find on record could use it as well (the
    /// newest single-host failure, when it covers them all: each request finds the newest that
    /// covers it).
    fn singles_wait(&self, rest: &RestOfGroup, key: QueueKey, group: &Group) -> bool {
        self.singles_wait_unless(rest.min_gpus, key, group)
            .is_some_and(|by| {
                by.is_none_or(|by| self.now.saturating_add(rest.shortest_resumable) > by)
            })
    }

    /// Whether every single-host workload of the group after `key` asking for `min_gpus` or more
    /// would be left waiting without a search (see `singles_wait`) unless it can resume and its
    /// minimum runtime ends by the time returned, if any: the latest of the reservations a search
    /// would be worth for such work (`None` if not so).
    fn singles_wait_unless(
        &self,
        min_gpus: u32,
        key: QueueKey,
        group: &Group,
    ) -> Option<Option<Time>> {
        if self.shortcuts != Shortcuts::On || self.watch.is_some() {
            return None;
        }
        let lookup = |gpus| {
            self.failures
                .latest_covering(group.rank, &group.bits, false, gpus)
        };
        let newest = lookup(u32::MAX)?;
        let (latest, all_find_it) = if newest.from <= min_gpus {
            (newest, true)
        } else {
            (lookup(min_gpus)?, false)
        };
        if self.pool.loosened_after(latest.at) {
            return None;
        }
        self.reserved_ahead_of(key, |h| {
            all_find_it && self.may_backfill(h, &latest.spec, latest.key)
        })
    }

    /// Leaves single-host workload `q` waiting as `try_allocated` would, without its lookups,
    /// where that is known already: the headroom holds the rest back; a failure on record rules
    /// it out (see `ruled_out`); or it is of the size of the group's request the headroom held
    /// back last, with the same hosts open to it, and the pool as it was then (see [`HeldBack`]).
    ///
    /// Reads the workload's brief (kept by the lineup, else made from its spec), and its spec only
    /// where its place in the queue matters.
    fn settled_without_a_try(&mut self, q: u32, group: &mut Group) -> bool {
        let w = &match self.briefs {
            Some(briefs) => briefs[q as usize],
            None => Brief::of(&self.queued[q as usize]),
        };
        if self.shortcuts != Shortcuts::On
            || w.gpus > self.pool.node_size
            || self
                .watch
                .is_some_and(|id| self.queued[q as usize].id == id)
        {
            return false;
        }
        if !w.debug && self.headroom_holds(w.gpus, group) {
            self.note_group(group);
            return true;
        }
        let rank = group.rank;
        let key = || QueueKey::fair_share(&self.queued[q as usize], rank);
        if self.ruled_out(q, w, &key, group) {
            self.note_group(group);
            return true;
        }
        let held_back_alike = |h: &HeldBack| {
            h.at == self.pool.changes
                && h.gpus == w.gpus
                && h.recorded == self.failures.recorded()
                && h.same_backfill
                    .holds(&key, w.resumable, w.min_runtime, self.now)
        };
        if !w.debug && group.held_back.0.iter().any(held_back_alike) {
            let id = self.queued[q as usize].id;
            self.held_back(id, group);
            return true;
        }
        false
    }

    /// Whether single-host workload `w` is one `try_allocated` would find hopeless: a failure on
    /// record rules it out, with no host easier since and no reserved host open to it that was
    /// closed to the failure (see `ruled_out`).
    fn ruled_out(&self, q: u32, w: &Brief, key: &impl Fn() -> QueueKey, group: &mut Group) -> bool {
        debug_assert!(
            !self
                .pool
                .held
                .iter()
                .any(|h| h.live && h.workload == self.queued[q as usize].id),
            "only gangs reserve"
        );
        let at = (self.pool.changes, self.failures.recorded());
        let verdict = group.verdicts.get(at, key, w.gpus, |key| {
            let Some(f) = self
                .failures
                .latest_covering(group.rank, &group.bits, false, w.gpus)
            else {
                return (Verdict::Search, None);
            };
            if self.pool.loosened_after(f.at) {
                return (Verdict::Search, None);
            }
            let mut unless_by = None;
            let mut until: Option<QueueKey> = None;
            for h in self.pool.held.iter().filter(|h| h.live) {
                if self.may_backfill(h, &f.spec, f.key) {
                    continue;
                }
                if key < h.key {
                    until = Some(until.map_or(h.key, |u| u.min(h.key)));
                } else {
                    unless_by = Some(unless_by.map_or(h.at, |by: Time| by.max(h.at)));
                }
            }
            match until {
                Some(_) => (Verdict::Search, until),
                None => (Verdict::RuledOut { unless_by }, None),
            }
        });
        verdict.rules_out(w.resumable, w.min_runtime, self.now)
    }

    /// The gangs of a group none of whose work can start by fair share alone, in queue order,
    /// while reservations are left to offer: only they may still reserve (or, holding a
    /// reservation, take work behind them). Sorts the gangs, not the whole group; where the
    /// lineup keeps the group's gangs and debug work in queue order (`special`), reads only those.
    fn scan_gangs(&mut self, members: &[u32], special: Option<&[u32]>, group: &mut Group) {
        let node_size = self.pool.node_size;
        let gang = |q: u32| self.queued[q as usize].gpus > node_size && !self.started[q as usize];
        let gangs: Vec<u32> = match special {
            Some(special) => {
                debug_assert!(special.iter().copied().eq(members
                    .iter()
                    .copied()
                    .filter(|&g| crate::lineup::special(&self.queued[g as usize], node_size))));
                special.iter().copied().filter(|&q| gang(q)).collect()
            }
            None => {
                let mut gangs: Vec<(QueueKey, u32)> = (members.iter().copied())
                    .filter(|&q| gang(q))
                    .map(|q| {
                        (
                            QueueKey::fair_share(&self.queued[q as usize], group.rank),
                            q,
                        )
                    })
                    .collect();
                gangs.sort_unstable();
                gangs.into_iter().map(|(_, q)| q).collect()
            }
        };
        for q in gangs {
            if self.attempts >= self.max_reservations {
                break;
            }
            self.try_allocated(q, group);
        }
    }

    /// Unallocated work on the idle GPUs allocated work left, in queue order.
    fn scan_unallocated(&mut self) {
        // Once this pass has requeued allocated work, the driver decides again at once; free work
        // waits for that pass rather than start where the requeued work would preempt it within
        // the same second.
        if self.pool.idle_total > 0 && !self.pool.requeued_allocated {
            let mut free = match self.lineup {
                Some(lineup) => FreeOrder::Walked(lineup.free(self.queued, self.standings)),
                None => FreeOrder::Picked(FreeQueue::new(self.queued, self.standings)),
            };
            let fragile = !self.funded_waits();
            // Reservations are held only by gangs that wait.
            debug_assert!(!fragile || self.pool.held.iter().all(|h| !h.live));
            while self.pool.idle_total > 0 {
                let fits = self.pool.free_fit(fragile);
                let Some((q, rank)) = free.next(fits, self.pool.idle_total) else {
                    break;
                };
                self.try_idle_only(q, rank);
            }
        }
        if let Some(id) = self.watch {
            let free = self.queued.iter().find(|q| q.id == id && !q.is_allocated());
            if let Some(w) = free.filter(|_| self.watched.is_none()) {
                // Work that cannot resume comes after all free work that can (queue order).
                let resumable_ahead = if w.resumable {
                    0
                } else {
                    let resumable = |q: &&WorkloadSpec| !q.is_allocated() && q.resumable;
                    self.queued.iter().filter(resumable).count() as u32
                };
                self.watched = Some(WaitReason::IdleOnly {
                    idle_gpus: self.pool.idle_total,
                    resumable_ahead,
                    funded_waiting: !w.resumable && self.funded_waits(),
                });
            }
        }
    }

    /// Whether allocated work is left waiting by this pass (its groups are noted as blocked, or
    /// held back by the headroom). Free work that cannot resume does not start then: it would be
    /// stopped, its progress lost, as soon as that work could use its GPUs, which on a busy
    /// cluster is before nearly every such run ends (the README's "Free work that cannot resume
    /// waits for funded work").
    fn funded_waits(&self) -> bool {
        self.blocked || self.held_by_headroom
    }

    /// Starts unallocated work on idle GPUs if a placement exists (reserved ones only if it is
    /// resumable: see [`Pass::may_backfill`]).
    fn try_idle_only(&mut self, q: u32, rank: u32) {
        let w = self.queued[q as usize];
        let key = QueueKey::fair_share(&w, rank);
        let backfill = |h: &Held| self.may_backfill(h, &w, key);
        let rules = Rules {
            may_backfill: &backfill,
            victim: IDLE_ONLY,
            only: None,
        };
        if let Some(choice) = self.pool.find(w.gpus, &rules) {
            self.start(q, rank, choice, None, None);
        }
    }

    /// The fast lane (DESIGN §4.11): debug work, in queue order, on idle GPUs or in place of free
    /// work and of unprotected resumable work of any leaf (or any unprotected work its leaf may
    /// preempt by fair share), while the lane has room.
    fn scan_lane(&mut self, debug: &[u32]) {
        if self.lane_room == 0 || debug.is_empty() {
            return;
        }
        let mut lane: Vec<(QueueKey, u32)> = debug
            .iter()
            .filter(|&&i| self.queued[i as usize].gpus <= self.pool.node_size)
            .map(|&i| {
                let w = &self.queued[i as usize];
                (QueueKey::fair_share(w, self.standings.leaf_rank(w.leaf)), i)
            })
            .collect();
        lane.sort_unstable();
        // The smallest request that found nothing, as of a pool version: until some host gets
        // easier (starts only make placement harder), larger ones are not searched in the lane.
        // They could differ only by victims their own leaf may take by fair share, which the
        // allocated scan that follows still offers them.
        let mut failed: Option<(u64, u32)> = None;
        // Each leaf's fair-share eligibility, worked out once per pass.
        let mut victims_by_rank: Vec<Option<Victims>> =
            (0..self.standings.leaf_count()).map(|_| None).collect();
        let now = self.now;
        for (key, q) in lane {
            let w = self.queued[q as usize];
            if w.gpus > self.lane_room {
                self.lane_turned_away = true;
                continue;
            }
            if failed.is_some_and(|(at, gpus)| w.gpus >= gpus && !self.pool.loosened_after(at)) {
                continue;
            }
            let victims = victims_by_rank[key.rank() as usize]
                .get_or_insert_with(|| Victims::of(w.leaf, self));
            let victims: &Victims = victims;
            let victim = |r: &Run| {
                !r.spec.is_allocated()
                    || (!r.is_protected(now) && (r.spec.resumable || victims.may_take(r)))
            };
            let choice = self.find_idle_then_preempting(&w, key, &victim);
            match choice {
                Some(choice) => {
                    self.lane_room -= w.gpus;
                    self.start(
                        q,
                        key.rank(),
                        choice,
                        Some(victims),
                        Some(PreemptRule::FastLane),
                    );
                }
                None => failed = Some((self.pool.changes, w.gpus)),
            }
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
            .enumerate()
            .filter(|&(rank, _)| group.victims.eligible(rank))
            .map(|(_, g)| g)
            .sum();
        let reach = self.pool.idle_total + self.pool.free_work_gpus + preemptible;
        group.reach = Some((self.pool.changes, reach));
        reach
    }

    /// Notes a group's leaves in `wake_for` (once: again would OR the same leaves in).
    fn note_group(&mut self, group: &mut Group) {
        if !group.noted {
            group.noted = true;
            self.note_blocked(&group.victims);
        }
    }

    fn note_blocked(&mut self, victims: &Victims) {
        self.blocked = true;
        for (rank, w) in self.wake_for.iter_mut().enumerate() {
            *w |= victims.eligible(rank);
        }
    }

    /// A placement for `w` on idle GPUs if one exists, else by preempting runs `victim` allows.
    fn find_idle_then_preempting(
        &self,
        w: &WorkloadSpec,
        key: QueueKey,
        victim: &impl Fn(&Run) -> bool,
    ) -> Option<Choice> {
        let backfill = |h: &Held| self.may_backfill(h, w, key);
        let idle = Rules {
            may_backfill: &backfill,
            victim: IDLE_ONLY,
            only: None,
        };
        let preempting = Rules {
            may_backfill: &backfill,
            victim: Some(victim),
            only: None,
        };
        if self.pool.idle_could_fit(w.gpus) {
            if let Some(choice) = self.pool.find(w.gpus, &idle) {
                return Some(choice);
            }
        }
        self.pool.find(w.gpus, &preempting)
    }

    /// Which reservations `w` may start on, as bits by index in `pool.held` (`None` if there are
    /// too many to say in 64 bits).
    fn backfill_bits(&self, w: &WorkloadSpec, key: QueueKey) -> Option<u64> {
        if self.pool.held.len() > 64 {
            return None;
        }
        Some(
            self.pool
                .held
                .iter()
                .enumerate()
                .filter(|(_, h)| h.live && self.may_backfill(h, w, key))
                .fold(0, |bits, (i, _)| bits | 1 << i),
        )
    }

    /// Whether `w` may start on GPUs reserved by `held` (DESIGN §4.8): work ahead of the holder in
    /// the queue may; work behind it only if it is resumable and its minimum runtime ends by the
    /// reservation's time, when the holder may preempt it (rule `Reserved`) without anyone losing
    /// progress. Free work's minimum runtime is 0.
    fn may_backfill(&self, held: &Held, w: &WorkloadSpec, key: QueueKey) -> bool {
        held.workload == w.id
            || key < held.key
            || (w.resumable && self.now + w.min_runtime <= held.at)
    }

    /// Whether starting `w` as `choice` would leave the fast lane less than its headroom. Debug
    /// work is never held back. Other allocated work takes out of the lane's reach every GPU it
    /// gets except those of non-resumable victims (which the lane could not have taken).
    fn takes_headroom(&self, w: &WorkloadSpec, choice: &Choice) -> bool {
        if self.headroom == 0 || w.is_debug() {
            return false;
        }
        let outside: u32 = choice
            .victims
            .iter()
            .map(|&v| &self.pool.runs[v as usize])
            .filter(|r| r.spec.is_allocated() && !r.spec.resumable)
            .map(|r| r.usable_gpus)
            .sum();
        let taken = w.gpus.saturating_sub(outside);
        self.pool.lane_reach() < self.headroom + taken
    }

    /// Notes that workload `id` could start but for the headroom.
    fn held_back(&mut self, id: WorkloadId, group: &mut Group) {
        self.held_by_headroom = true;
        self.note_group(group);
        if self.watch == Some(id) {
            self.watched = Some(WaitReason::Headroom {
                kept_gpus: self.headroom,
            });
        }
    }

    /// Whether every placement of a single-host request of `group` for `gpus` or more that is
    /// not debug work would be held back by the headroom now. Once the pass has held some work
    /// back (`held_by_headroom`), such a request can then only be held back or fail to fit, and
    /// neither changes the decision: it needs no search. A placement takes out of the lane's reach
    /// every GPU it gets but those of victims that cannot resume (see `takes_headroom`), so it is
    /// held back when the reach is short of the headroom plus its size, or of the headroom alone if
    /// the group may kill such work.
    fn headroom_holds(&self, gpus: u32, group: &Group) -> bool {
        let taken = if group.kills { 0 } else { gpus };
        self.shortcuts == Shortcuts::On
            && self.held_by_headroom
            && self.headroom > 0
            && self.pool.lane_reach() < self.headroom + taken
    }

    /// Tries to start allocated workload `q`. Its key when it is a single-host request left
    /// waiting by a failure on record or by its own failed search.
    fn try_allocated(&mut self, q: u32, group: &mut Group) -> Option<QueueKey> {
        let w = self.queued[q as usize];
        let key = QueueKey::fair_share(&w, group.rank);
        let gang = w.gpus > self.pool.node_size;
        if !gang && !w.is_debug() && self.watch != Some(w.id) && self.headroom_holds(w.gpus, group)
        {
            self.note_group(group);
            return None;
        }
        if gang {
            let holds = self.pool.held.iter().any(|h| h.live && h.workload == w.id);
            if holds || self.attempts < self.max_reservations {
                self.try_reserving(q, key, group, holds);
                return None;
            }
        }
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
        let only = (known.is_some() && !gang).then_some(nodes.as_slice());
        let same_as_held_back = |h: &HeldBack| {
            h.at == self.pool.changes
                && h.gpus == w.gpus
                && h.only.as_deref() == only
                && Some(h.backfill) == self.backfill_bits(&w, key)
        };
        // Debug work is never held back.
        if !hopeless
            && self.shortcuts == Shortcuts::On
            && !w.is_debug()
            && self.watch != Some(w.id)
            && group.held_back.0.iter().any(same_as_held_back)
        {
            self.nodes = nodes;
            self.held_back(w.id, group);
            return None;
        }
        let choice = if hopeless {
            // A failure on record rules this request out, and no host loosened since it (else
            // a single-host request would search those hosts): recording this one as well would
            // add nothing, and would push older, more general failures out of the memo.
            Err(None)
        } else {
            self.search(&w, key, group, only)
        };
        let held_back = choice
            .as_ref()
            .is_ok_and(|choice| self.takes_headroom(&w, choice));
        // What the search depended on, kept only when it is held back.
        let searched = only.filter(|_| held_back).map(<[usize]>::to_vec);
        self.nodes = nodes;
        let found = match choice {
            Ok(_) if held_back => {
                // A placement exists: nothing to record as a failed search.
                let record = self.backfill_bits(&w, key).map(|backfill| HeldBack {
                    at: self.pool.changes,
                    gpus: w.gpus,
                    backfill,
                    only: searched,
                    recorded: self.failures.recorded(),
                    same_backfill: SameBackfill::of(
                        self.pool
                            .held
                            .iter()
                            .enumerate()
                            .filter(|(_, h)| h.live)
                            .map(|(i, h)| (h.key, h.at, backfill & 1 << i != 0)),
                    ),
                });
                group.held_back.keep(record);
                self.held_back(w.id, group);
                return None;
            }
            Ok(choice) => {
                self.start(q, group.rank, choice, Some(&group.victims), None);
                return None;
            }
            Err(found) => found,
        };
        // Ruled out by a failure on record, or by its own search (recorded below).
        let ruled_out = hopeless || found.is_some();
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
        self.note_group(group);
        self.explain_blocked(&w, key, group);
        (ruled_out && !gang).then_some(key)
    }

    fn explain_blocked(&mut self, w: &WorkloadSpec, key: QueueKey, group: &Group) {
        if self.watch == Some(w.id) {
            let may_take = |r: &Run| group.victims.may_take(r);
            let reason = blocked_reason(&self.pool, w, group.rank, &may_take, &|h| {
                self.may_backfill(h, w, key)
            });
            self.watched = Some(reason);
        }
    }

    /// A multi-host workload among the first blocked ones (DESIGN §4.8). Besides what its leaf
    /// may preempt by fair share, it may take resumable work behind it in the queue whose
    /// protection has ended: work that started on its reserved hosts knowing it would be
    /// preemptible by now. If it cannot start, it reserves the hosts it could have earliest.
    fn try_reserving(&mut self, q: u32, key: QueueKey, group: &mut Group, holds: bool) {
        let w = self.queued[q as usize];
        let now = self.now;
        if !holds && self.never_starts(&w, group) {
            self.attempts += 1;
            self.explain_blocked(&w, key, group);
            return;
        }
        let victims = &group.victims;
        let behind = |r: &Run| victims.behind(r, key);
        let victim = |r: &Run| !r.spec.is_allocated() || (!r.is_protected(now) && behind(r));
        // What it could have now and in time, from who holds the hosts (`eventually` as the leaves
        // whose work it never takes) wherever that tells: a search now only if enough is ready.
        let eventually = |r: &Run| !r.spec.is_allocated() || behind(r);
        let blockers = victims.blockers(&w, group.rank, self.standings);
        let hosts = std::mem::take(&mut self.outlook_hosts);
        let mut outlook = if self.shortcuts == Shortcuts::On {
            self.pool
                .gang_outlook_kept(w.id, w.gpus, &blockers, &eventually, hosts)
        } else {
            self.pool.gang_outlook(&blockers, &eventually, hosts)
        };
        let mut choice = if outlook.reach_now >= w.gpus {
            self.find_idle_then_preempting(&w, key, &victim)
        } else {
            debug_assert!(self.find_idle_then_preempting(&w, key, &victim).is_none());
            None
        };
        if choice.as_ref().is_some_and(|c| self.takes_headroom(&w, c)) {
            // Held back by the headroom, a gang still reserves: its hosts come to it in time.
            choice = None;
            self.held_by_headroom = true;
        }
        if let Some(choice) = choice {
            self.outlook_hosts = outlook.into_hosts();
            self.start(
                q,
                group.rank,
                choice,
                Some(&group.victims),
                Some(PreemptRule::Reserved),
            );
            return;
        }
        // Inline, not `note_group`: `behind` still borrows the group's victims.
        if !group.noted {
            group.noted = true;
            self.note_blocked(&group.victims);
        }
        if !holds {
            self.attempts += 1;
            let reserved: u32 = self
                .pool
                .held
                .iter()
                .filter(|h| h.live)
                .flat_map(|h| h.parts.iter().map(|p| p.gpus.count()))
                .sum();
            let within = |parts: &[NodeGpus]| {
                let more: u32 = parts.iter().map(|p| p.gpus.count()).sum();
                reserved == 0 || reserved + more <= self.reserve_cap
            };
            let known = outlook.known_earliest.is_some();
            let earliest = outlook.earliest(w.gpus);
            if !known && self.shortcuts == Shortcuts::On {
                self.pool.keep_earliest(w.id, w.gpus, &earliest);
            }
            if earliest.is_none() && outlook.reach_now < w.gpus {
                group.never = Some((w.gpus, self.pool.changes));
            }
            if let Some((at, parts)) = earliest.filter(|(at, parts)| *at > now && within(parts)) {
                self.pool.reserve(w.id, key, at, parts);
                self.wake_at(Some(at));
            }
        }
        self.outlook_hosts = outlook.into_hosts();
        self.explain_blocked(&w, key, group);
    }

    /// Whether gang `w`, holding no reservation, would find that it can neither start now nor
    /// ever have enough hosts, as a gang of its group before it found for as many GPUs or fewer.
    /// Nothing since made a host easier, and the later gang's outlook is no better: each run
    /// behind it in the queue is behind the earlier one too, the pass's starts (its group's work,
    /// ahead of it) are never its to take, and reservations made since only close hosts.
    fn never_starts(&self, w: &WorkloadSpec, group: &Group) -> bool {
        let Some((gpus, at)) = group.never else {
            return false;
        };
        let never =
            self.shortcuts == Shortcuts::On && gpus <= w.gpus && !self.pool.loosened_after(at);
        #[cfg(debug_assertions)]
        if never {
            let key = QueueKey::fair_share(w, group.rank);
            let victims = &group.victims;
            let eventually = |r: &Run| !r.spec.is_allocated() || victims.behind(r, key);
            let blockers = victims.blockers(w, group.rank, self.standings);
            let mut outlook = self.pool.gang_outlook(&blockers, &eventually, Vec::new());
            assert!(
                outlook.reach_now < w.gpus,
                "a gang after one that could never start"
            );
            assert_eq!(outlook.earliest(w.gpus), None);
        }
        never
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
        let victims = &group.victims;
        let backfill = |h: &Held| self.may_backfill(h, w, key);
        let victim =
            |r: &Run| !r.spec.is_allocated() || (!r.is_protected(now) && victims.may_take(r));
        let idle = Rules {
            may_backfill: &backfill,
            victim: IDLE_ONLY,
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

    /// Starts queued workload `q`, preempting the choice's victims. Each preemption's rule: free
    /// work, fair share where the preemptor's leaf may preempt the victim's (`eligible`, by rank),
    /// else `other`: the fast lane's or a reservation's, the only searches that take more.
    fn start(
        &mut self,
        q: u32,
        rank: u32,
        choice: Choice,
        victims: Option<&Victims>,
        other: Option<PreemptRule>,
    ) {
        let w = self.queued[q as usize];
        let idle_before = self.pool.idle_total;
        let mut touched: Vec<(NodeId, GpuSet)> = Vec::new();
        for &victim in &choice.victims {
            for part in self.pool.parts_of(victim) {
                touched.push((part.node, self.pool.slots[part.node.index()].free));
            }
            let r = &self.pool.runs[victim as usize];
            let rule = if !r.spec.is_allocated() {
                PreemptRule::FreeWork
            } else if victims.is_some_and(|v| v.eligible(r.rank as usize)) {
                PreemptRule::FairShare {
                    split: self
                        .standings
                        .split(w.leaf, r.spec.leaf)
                        .expect("a leaf never preempts itself"),
                    margin: if r.spec.resumable {
                        self.margin
                    } else {
                        self.kill_margin
                    },
                }
            } else {
                other.expect("only the fast lane and reservations take work outside fair share")
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

    fn finish(mut self) -> (Decision, Option<WaitReason>, Box<Pool>, Scratch) {
        // Blocked work waits for protections of leaves it may preempt to end; work held back by
        // the headroom for any resumable work's (it then comes within the lane's reach).
        if self.blocked || self.held_by_headroom {
            let soonest = self
                .pool
                .runs
                .iter()
                .filter(|r| {
                    r.alive
                        && ((self.blocked && self.wake_for[r.rank as usize])
                            || (self.held_by_headroom && r.spec.is_allocated() && r.spec.resumable))
                })
                .filter_map(|r| r.protected_until.filter(|&t| t > self.now))
                .min();
            self.wake_at(soonest);
        }
        if self.lane_turned_away && self.lane_may_open {
            self.wake_at(Some(self.now + LANE_RECHECK));
        }
        let now = self.now;
        let hold = (self.pool.held.iter())
            .filter(|h| h.live && h.at > now)
            .map(|h| h.at)
            .min();
        self.wake_at(hold);
        // The pass is over: its reservations' hosts go to the decision (a kept pool drops its
        // reservations when it takes the pass back).
        let reservations = self
            .pool
            .held
            .iter_mut()
            .filter(|h| h.live)
            .map(|h| Reservation {
                workload: h.workload,
                at: h.at,
                gpus: std::mem::take(&mut h.parts),
            })
            .collect();
        let decision = Decision {
            actions: self.actions,
            reservations,
            next_wake: self.wake,
            decide_again: self.pool.decide_again(),
        };
        let scratch = Scratch {
            queue: Queue::default(),
            started: self.started,
            wake_for: self.wake_for,
            failure_lists: self.failures.into_lists(),
            outlook_hosts: self.outlook_hosts,
        };
        (decision, self.watched, self.pool, scratch)
    }
}

/// A fair-share pass's buffers, which the engine keeps for the next pass rather than allocating
/// them again at every pass.
#[derive(Default)]
pub(crate) struct Scratch {
    queue: Queue,
    started: Vec<bool>,
    wake_for: Vec<bool>,
    failure_lists: Vec<Vec<Failure>>,
    outlook_hosts: Vec<(Time, usize, GpuSet)>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").finish_non_exhaustive()
    }
}

/// How often debug work held to the lane's share looks again for the window to let it through.
const LANE_RECHECK: Time = 60;

/// The fast lane's cap for this pass.
struct LaneWindow {
    /// GPUs debug work may hold through the lane at once.
    cap: u32,
    /// Held to the share, with a higher peak that time alone may open.
    may_open: bool,
}

/// The lane's cap at `now`: its `share` (GPUs), or its peak while the debug work that ran within
/// the window (ended runs and the running ones' time so far) averaged under the share.
fn lane_window(
    config: &Config,
    state: &ClusterState<'_>,
    now: Time,
    share: u32,
    schedulable: u32,
    debug_running: u32,
) -> LaneWindow {
    let peak = ((config.fast_lane_peak * f64::from(schedulable)).floor() as u32)
        .min(schedulable)
        .max(share);
    let window = config.fast_lane_window;
    if peak == share || window <= 0 {
        return LaneWindow {
            cap: share,
            may_open: false,
        };
    }
    let from = now - window;
    let budget = f64::from(share) * window as f64;
    let ended: f64 = state
        .ended_debug
        .iter()
        .map(|r| r.gpu_seconds_within(from, now))
        .sum();
    // The running debug work used at most its GPUs for the whole window: the runs are read only
    // when that bound does not settle it (a pass runs at every event; most are far from the cap).
    let under = if ended >= budget {
        false
    } else if ended + f64::from(debug_running) * (window as f64) < budget {
        true
    } else {
        ended + running_debug_within(state, from, now) < budget
    };
    LaneWindow {
        cap: if under { peak } else { share },
        may_open: !under,
    }
}

/// GPU-seconds the running debug work used within `[from, now]`.
fn running_debug_within(state: &ClusterState<'_>, from: Time, now: Time) -> f64 {
    state
        .running
        .iter()
        .filter(|r| r.spec.is_debug())
        .map(|r| f64::from(r.placement.gpu_count()) * (now - r.started_at.max(from)).max(0) as f64)
        .sum()
}

pub(crate) fn party(standings: &Standings, spec: &WorkloadSpec) -> Party {
    Party {
        workload: spec.id,
        leaf: spec.leaf,
        ratio: standings.ratio(spec.leaf),
        priority: spec.priority,
    }
}
