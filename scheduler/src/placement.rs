//! Where a workload can go (DESIGN §4.8): best fit on one host, whole hosts for a gang, and, when
//! neither works now, the earliest moment it could, for a reservation.

use crate::cluster::{GpuSet, NodeGpus, Placement};
use crate::ids::Time;
use crate::pool::{Blockers, Cost, Held, Pool, Run, Seen};

/// A way to place a workload: its GPUs and whom to preempt for them.
#[derive(Clone, Debug)]
pub(crate) struct Choice {
    pub placement: Placement,
    pub victims: Vec<u32>,
}

/// What a reserving gang could have (see [`Pool::gang_outlook`]).
pub(crate) struct GangOutlook {
    /// The hosts no one has reserved that it could have whole, each with when.
    hosts: Vec<(Time, usize, GpuSet)>,
    /// At most how many GPUs it could take now by preempting.
    pub reach_now: u32,
    /// Its earliest start, when a kept outlook knew it (see `pool::outlooks`).
    pub known_earliest: Option<Option<(Time, Vec<NodeGpus>)>>,
}

impl GangOutlook {
    /// An outlook of `reach_now`, its hosts to be added to `hosts` (emptied).
    pub(crate) fn from_parts(mut hosts: Vec<(Time, usize, GpuSet)>, reach_now: u32) -> Self {
        hosts.clear();
        GangOutlook {
            hosts,
            reach_now,
            known_earliest: None,
        }
    }

    /// The earliest moment `gpus` could start on those hosts, and which. `None` if never.
    pub(crate) fn earliest(&mut self, gpus: u32) -> Option<(Time, Vec<NodeGpus>)> {
        match self.known_earliest.take() {
            Some(known) => known,
            None => Pool::earliest_whole_hosts(&mut self.hosts, gpus),
        }
    }

    pub(crate) fn hosts(&self) -> &[(Time, usize, GpuSet)] {
        &self.hosts
    }

    pub(crate) fn hosts_mut(&mut self) -> &mut Vec<(Time, usize, GpuSet)> {
        &mut self.hosts
    }

    /// Its hosts' buffer, for the next outlook to reuse.
    pub(crate) fn into_hosts(self) -> Vec<(Time, usize, GpuSet)> {
        self.hosts
    }
}

/// The rules one search runs under.
///
/// Generic over the two rules, so that a search's calls to them (once per host and per run) are
/// inlined rather than made through a pointer.
pub(crate) struct Rules<'a, B: ?Sized, V: ?Sized> {
    pub may_backfill: &'a B,
    /// `None` ([`IDLE_ONLY`]): idle GPUs only. Otherwise, whether a live run may be preempted now.
    pub victim: Option<&'a V>,
    /// Look only at these hosts (ascending), for single-host placements.
    pub only: Option<&'a [usize]>,
}

/// The victim rule of a search on idle GPUs alone.
pub(crate) const IDLE_ONLY: Option<&NoVictim> = None;
pub(crate) type NoVictim = fn(&Run) -> bool;

impl Pool {
    /// The cheapest way to place `gpus` now, or `None`.
    pub(crate) fn find<B, V>(&self, gpus: u32, rules: &Rules<'_, B, V>) -> Option<Choice>
    where
        B: Fn(&Held) -> bool + ?Sized,
        V: Fn(&Run) -> bool + ?Sized,
    {
        self.find_or_reach(gpus, rules).ok()
    }

    /// As [`Pool::find`]; when nothing fits, how many GPUs the request could have gathered: for a
    /// gang, on all its usable hosts together; for a single host, on the best host it looked at.
    pub(crate) fn find_or_reach<B, V>(
        &self,
        gpus: u32,
        rules: &Rules<'_, B, V>,
    ) -> Result<Choice, u32>
    where
        B: Fn(&Held) -> bool + ?Sized,
        V: Fn(&Run) -> bool + ?Sized,
    {
        if gpus <= self.node_size {
            self.find_single(gpus, rules)
        } else {
            self.find_gang(gpus, rules)
        }
    }

    /// Best fit on one host: least cost, then fewest idle GPUs left over, then lowest host. When
    /// none fits, the most GPUs any host looked at could have given (a host too small to be
    /// searched counts as its size), which bounds what a smaller request could find there.
    fn find_single<B, V>(&self, gpus: u32, rules: &Rules<'_, B, V>) -> Result<Choice, u32>
    where
        B: Fn(&Held) -> bool + ?Sized,
        V: Fn(&Run) -> bool + ?Sized,
    {
        let mut best: Option<(Cost, u32, usize, GpuSet, u64)> = None;
        let mut most = 0;
        let mut items: Vec<(u32, Cost, u32, GpuSet)> = Vec::new();
        let everywhere = 0..self.slots.len();
        let mut with_idle = self.hosts_with_idle();
        // On idle GPUs alone only hosts with some can take it (what else the search learns, the
        // most a host could give, is read only when preempting).
        let nodes: &mut dyn Iterator<Item = usize> = match (rules.only, rules.victim) {
            (Some(only), _) => &mut only.iter().copied(),
            (None, None) => &mut with_idle,
            (None, Some(_)) => &mut everywhere.clone(),
        };
        for node in nodes {
            if rules.victim.is_some() {
                if let Some(could) = self.ruled_out_by_bound(node, gpus) {
                    most = most.max(could);
                    continue;
                }
            }
            let slot = &self.slots[node];
            if !slot.schedulable() {
                if rules.victim.is_some() {
                    self.note_bound(node, 0, Time::MAX);
                }
                continue;
            }
            if slot.size < gpus {
                most = most.max(slot.size);
                continue;
            }
            let usable = self.usable(node, rules.may_backfill);
            let free = slot.free.intersection(usable);
            let idle = free.count();
            if idle >= gpus {
                let leftover = idle - gpus;
                if best
                    .as_ref()
                    .is_none_or(|b| (Cost::ZERO, leftover) < (b.0, b.1))
                {
                    best = Some((Cost::ZERO, leftover, node, free, 0));
                    if leftover == 0 {
                        break;
                    }
                }
                continue;
            }
            let Some(victim_ok) = rules.victim else {
                most = most.max(idle);
                continue;
            };
            // The host's bounds: too few GPUs even if every possible victim were preempted, or no
            // way to beat the best choice so far.
            let (victims, until) = self.victims_until(node);
            let at_most = free.union(victims).count();
            self.note_bound(node, at_most, until);
            if at_most < gpus {
                most = most.max(at_most);
                continue;
            }
            if let (Some(b), Some(c)) = (&best, self.cheapest_victim(node)) {
                if c > b.0 {
                    continue;
                }
            }
            items.clear();
            let mut reachable = idle;
            // Every subset's cost is at least its cheapest member's (costs add field by field).
            let mut cheapest = None;
            for &(run, held) in self.slot_runs(node) {
                let r = &self.runs[run as usize];
                let gain = held.intersection(usable);
                if r.alive && !r.fresh && !gain.is_empty() && victim_ok(r) {
                    let count = gain.count();
                    reachable += count;
                    let cost = r.cost(self.now);
                    items.push((count, cost, run, gain));
                    cheapest = Some(cheapest.map_or(cost, |c: Cost| c.min(cost)));
                }
            }
            most = most.max(reachable);
            if reachable < gpus {
                continue;
            }
            // A host whose cheapest victim alone costs more than the best choice so far cannot
            // beat it: skip the knapsack.
            let Some(cheapest) = cheapest else {
                continue;
            };
            if best.as_ref().is_some_and(|b| cheapest > b.0) {
                continue;
            }
            let Some((cost, chosen)) = cheapest_subset(&items, cheapest, gpus - idle) else {
                continue;
            };
            let mut gained = free;
            for (k, item) in items.iter().enumerate() {
                if chosen & (1u64 << k) != 0 {
                    gained = gained.union(item.3);
                }
            }
            let leftover = gained.count() - gpus;
            if best.as_ref().is_none_or(|b| (cost, leftover) < (b.0, b.1)) {
                best = Some((cost, leftover, node, gained, chosen));
            }
        }
        let Some((_, _, node, gained, chosen)) = best else {
            return Err(most);
        };
        // The victims are the chosen items of the best host, in its run order.
        let victims = if chosen == 0 {
            Vec::new()
        } else {
            let usable = self.usable(node, rules.may_backfill);
            let victim_ok = rules.victim.expect("victims only when preempting");
            self.slot_runs(node)
                .iter()
                .filter(|&&(run, held)| {
                    let r = &self.runs[run as usize];
                    r.alive && !r.fresh && !held.intersection(usable).is_empty() && victim_ok(r)
                })
                .enumerate()
                .filter(|(k, _)| chosen & (1u64 << k) != 0)
                .map(|(_, &(run, _))| run)
                .collect()
        };
        Ok(Choice {
            placement: Placement::on(Pool::node_id(node), gained.lowest(gpus)),
            victims,
        })
    }

    /// Whole hosts, cheapest first, until they hold `gpus`.
    fn find_gang<B, V>(&self, gpus: u32, rules: &Rules<'_, B, V>) -> Result<Choice, u32>
    where
        B: Fn(&Held) -> bool + ?Sized,
        V: Fn(&Run) -> bool + ?Sized,
    {
        let mut hosts: Vec<(Cost, usize)> = Vec::new();
        let mut reachable = 0;
        let everywhere = 0..self.slots.len();
        let mut gang_hosts = self.gang_hosts();
        // Preempting, only hosts whose every GPU is idle or held by a possible victim can serve.
        let nodes: &mut dyn Iterator<Item = usize> = match rules.victim {
            Some(_) => &mut gang_hosts,
            None => &mut everywhere.clone(),
        };
        for node in nodes {
            let slot = &self.slots[node];
            if !slot.schedulable() || self.usable(node, rules.may_backfill) != slot.all {
                continue;
            }
            // A host with a run no one may preempt is out without reading its runs.
            let cost = if slot.free == slot.all {
                Some(Cost::ZERO)
            } else if let Some(victim_ok) = rules.victim.filter(|_| self.gang_may_take(node)) {
                self.slot_runs(node)
                    .iter()
                    .try_fold(Cost::ZERO, |sum, &(run, _)| {
                        let r = &self.runs[run as usize];
                        match (r.alive, r.alive && !r.fresh && victim_ok(r)) {
                            (false, _) => Some(sum),
                            (true, true) => Some(sum.plus(r.cost(self.now))),
                            (true, false) => None,
                        }
                    })
            } else {
                None
            };
            if let Some(cost) = cost {
                reachable += slot.size;
                hosts.push((cost, node));
            }
        }
        if reachable < gpus {
            return Err(reachable);
        }
        hosts.sort_unstable();
        let mut placement = Placement { parts: Vec::new() };
        let mut victims: Vec<u32> = Vec::new();
        let mut total = 0;
        for &(_, node) in &hosts {
            if total >= gpus {
                break;
            }
            let slot = &self.slots[node];
            total += slot.size;
            placement.parts.push(NodeGpus {
                node: Pool::node_id(node),
                gpus: slot.all,
            });
            victims.extend(
                self.slot_runs(node)
                    .iter()
                    .filter(|(r, _)| self.runs[*r as usize].alive)
                    .map(|(r, _)| *r),
            );
        }
        placement.parts.sort_unstable();
        victims.sort_unstable_by_key(|&r| self.runs[r as usize].spec.id);
        victims.dedup();
        Ok(Choice { placement, victims })
    }

    /// What a gang that reserves (DESIGN §4.8) could have, if every live run `eventually` says
    /// yes to were preempted as soon as its protection ends: each host no one has reserved that
    /// it could have whole, with when; and at most how many GPUs it could take now. `blockers`
    /// says the same as `eventually`, as the leaves whose work it says no to, so that a host is
    /// judged by who holds it rather than run by run wherever that tells. `hosts` is a buffer to
    /// reuse.
    pub(crate) fn gang_outlook(
        &self,
        blockers: &Blockers,
        eventually: &impl Fn(&Run) -> bool,
        hosts: Vec<(Time, usize, GpuSet)>,
    ) -> GangOutlook {
        self.gang_outlook_seen(blockers, eventually, hosts, None).0
    }

    /// [`Pool::gang_outlook`], noting in `seen` (if given) what each host is to the gang. Also
    /// whether its holders told that of every host (else some was read run by run, by
    /// `eventually`).
    pub(crate) fn gang_outlook_seen(
        &self,
        blockers: &Blockers,
        eventually: &impl Fn(&Run) -> bool,
        hosts: Vec<(Time, usize, GpuSet)>,
        mut seen: Option<&mut Vec<Seen>>,
    ) -> (GangOutlook, bool) {
        let now = self.now;
        let free_at = |r: &Run| eventually(r).then(|| r.protected_until.unwrap_or(now));
        let mut outlook = GangOutlook::from_parts(hosts, 0);
        if let Some(seen) = seen.as_deref_mut() {
            seen.clear();
            seen.resize(self.slots.len(), Seen::Never);
        }
        let mut by_holders_alone = true;
        for (node, slot) in self.slots.iter().enumerate() {
            if !slot.schedulable() {
                continue;
            }
            let by_holders = self.ready_by_holders(node, blockers);
            by_holders_alone &= by_holders.is_some();
            #[cfg(debug_assertions)]
            if let Some(ready) = by_holders {
                assert_eq!(
                    ready,
                    self.ready_at(node, &free_at),
                    "host {node}'s holders"
                );
            }
            let ready = by_holders.unwrap_or_else(|| self.ready_at(node, &free_at));
            // Ready now: its runs may all be preempted now (a reserved host too, by work that
            // may use it).
            if ready == Some(now) {
                outlook.reach_now += slot.size;
            }
            if let Some(at) = ready.filter(|_| slot.reservation.is_none()) {
                outlook.hosts.push((at, node, slot.all));
            }
            if let Some(seen) = seen.as_deref_mut() {
                seen[node] = Seen::of(ready, now);
            }
        }
        (outlook, by_holders_alone)
    }

    /// The earliest moment `gpus` could start on hosts no one has reserved, with each run's GPUs
    /// free from the moment `free_at` gives (`None`: never; a moment past is now).
    ///
    /// On one host, a request takes the GPUs that come free first, lowest index first among those
    /// freed at the same moment. GPUs are grouped by that moment (idle ones now, each run's when
    /// its protection ends), so a host costs a sort of its few distinct moments, not of its GPUs.
    pub(crate) fn earliest_by(
        &self,
        gpus: u32,
        free_at: &impl Fn(&Run) -> Option<Time>,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        if gpus <= self.node_size {
            return self.earliest_single(gpus, free_at);
        }
        self.earliest_gang(gpus, |node| self.ready_at(node, free_at))
    }

    /// When host `node` would be wholly free: when its last run's GPUs come free (`None`: never).
    fn ready_at(&self, node: usize, free_at: &impl Fn(&Run) -> Option<Time>) -> Option<Time> {
        let mut at = self.now;
        for &(run, held) in self.slot_runs(node) {
            let r = &self.runs[run as usize];
            if !r.alive {
                continue;
            }
            match free_at(r) {
                Some(t) => {
                    if !held.is_empty() {
                        at = at.max(t);
                    }
                }
                None if held.is_empty() => {}
                None => return None,
            }
        }
        Some(at)
    }

    /// A gang takes whole hosts unreserved: each is ready when `ready` says.
    fn earliest_gang(
        &self,
        gpus: u32,
        ready: impl Fn(usize) -> Option<Time>,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        let mut hosts: Vec<(Time, usize, GpuSet)> = Vec::with_capacity(self.slots.len());
        for (node, slot) in self.slots.iter().enumerate() {
            if !slot.schedulable() || slot.reservation.is_some() {
                continue;
            }
            if let Some(at) = ready(node) {
                hosts.push((at, node, slot.all));
            }
        }
        Pool::earliest_whole_hosts(&mut hosts, gpus)
    }

    /// The earliest moment `gpus` could start on whole hosts, each ready at its moment.
    fn earliest_whole_hosts(
        hosts: &mut Vec<(Time, usize, GpuSet)>,
        gpus: u32,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        #[cfg(debug_assertions)]
        let sorted = Pool::earliest_sorted(&mut hosts.clone(), gpus);
        if let Some(found) = Pool::earliest_uniform(hosts, gpus) {
            #[cfg(debug_assertions)]
            assert_eq!(found, sorted, "hosts of one size chosen without sorting");
            return found;
        }
        Pool::earliest_sorted(hosts, gpus)
    }

    /// [`Pool::earliest_by`]'s choice of whole hosts, sorting them.
    fn earliest_sorted(
        hosts: &mut [(Time, usize, GpuSet)],
        gpus: u32,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        // The earliest moment enough whole hosts are ready...
        hosts.sort_unstable_by_key(|h| (h.0, h.1));
        let mut total = 0;
        let ready = hosts.iter().position(|h| {
            total += h.2.count();
            total >= gpus
        })?;
        let at = hosts[ready].0;
        // ...and, among the hosts ready by then, those that become ready last: hosts idle now
        // stay with the queue (work whose minimum runtime ends in time may backfill them anyway).
        // Hosts are sorted by (moment, host): walk the moments from the latest, each one's hosts
        // in order.
        let by_then = hosts.partition_point(|h| h.0 <= at);
        let mut parts = Vec::new();
        let mut total = 0;
        let mut end = by_then;
        'moments: while end > 0 {
            let moment = hosts[end - 1].0;
            let begin = hosts[..end].partition_point(|h| h.0 < moment);
            for &(_, node, mask) in &hosts[begin..end] {
                if total >= gpus {
                    break 'moments;
                }
                total += mask.count();
                parts.push(NodeGpus {
                    node: Pool::node_id(node),
                    gpus: mask,
                });
            }
            end = begin;
        }
        parts.sort_unstable();
        Some((at, parts))
    }

    /// [`Pool::earliest_by`]'s choice among hosts of one size, without sorting them: the `k`
    /// hosts the gang needs are ready at the `k`-th earliest moment (by moment, then host), and
    /// of the hosts ready by then it takes the `k` that become ready last (by moment, latest
    /// first, then host). `None` if the hosts differ in size (the caller sorts them instead).
    fn earliest_uniform(
        hosts: &mut Vec<(Time, usize, GpuSet)>,
        gpus: u32,
    ) -> Option<Option<(Time, Vec<NodeGpus>)>> {
        let size = hosts.first().map_or(0, |h| h.2.count());
        if size == 0 || hosts.iter().any(|h| h.2.count() != size) {
            return None;
        }
        let k = gpus.div_ceil(size) as usize;
        if k > hosts.len() {
            return Some(None);
        }
        hosts.select_nth_unstable_by_key(k - 1, |h| (h.0, h.1));
        let at = hosts[k - 1].0;
        hosts.retain(|h| h.0 <= at);
        hosts.select_nth_unstable_by_key(k - 1, |h| (std::cmp::Reverse(h.0), h.1));
        let mut parts: Vec<NodeGpus> = hosts[..k]
            .iter()
            .map(|&(_, node, mask)| NodeGpus {
                node: Pool::node_id(node),
                gpus: mask,
            })
            .collect();
        parts.sort_unstable();
        Some(Some((at, parts)))
    }

    /// [`Pool::earliest_by`] for a request that fits on one host: the first host by (moment, host).
    fn earliest_single(
        &self,
        gpus: u32,
        free_at: &impl Fn(&Run) -> Option<Time>,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        let mut moments: Vec<(Time, GpuSet)> = Vec::new();
        let mut first: Option<(Time, usize, GpuSet)> = None;
        for (node, slot) in self.slots.iter().enumerate() {
            if !slot.schedulable() || slot.reservation.is_some() || slot.size < gpus {
                continue;
            }
            moments.clear();
            if !slot.free.is_empty() {
                moments.push((self.now, slot.free));
            }
            // GPUs freed before the best host so far: a host with fewer cannot take its place.
            let mut sooner = 0;
            let beat = |t: Time| first.is_none_or(|f| t < f.0);
            if beat(self.now) {
                sooner += slot.free.count();
            }
            for &(run, held) in self.slot_runs(node) {
                let r = &self.runs[run as usize];
                if !r.alive || held.is_empty() {
                    continue;
                }
                if let Some(at) = free_at(r) {
                    let at = at.max(self.now);
                    moments.push((at, held));
                    if beat(at) {
                        sooner += held.count();
                    }
                }
            }
            if sooner < gpus {
                continue;
            }
            if let Some((at, mask)) = first_to_free(&mut moments, gpus) {
                if beat(at) {
                    first = Some((at, node, mask));
                    if at == self.now {
                        // Nothing comes sooner; a later host would lose the tie.
                        break;
                    }
                }
            }
        }
        first.map(|(at, node, gpus)| {
            let part = NodeGpus {
                node: Pool::node_id(node),
                gpus,
            };
            (at, vec![part])
        })
    }
}

/// The `gpus` GPUs of one host that come free first, lowest index first among those freed at the
/// same moment, and when the last of them does; `None` if the host has fewer. `moments` holds
/// disjoint sets of GPUs and when each comes free.
fn first_to_free(moments: &mut [(Time, GpuSet)], gpus: u32) -> Option<(Time, GpuSet)> {
    if moments.iter().map(|m| m.1.count()).sum::<u32>() < gpus {
        return None;
    }
    moments.sort_unstable_by_key(|m| m.0);
    let mut chosen = GpuSet::EMPTY;
    let mut k = 0;
    loop {
        // All GPUs freed at this moment, whichever run holds them.
        let at = moments[k].0;
        let mut same = GpuSet::EMPTY;
        while k < moments.len() && moments[k].0 == at {
            same = same.union(moments[k].1);
            k += 1;
        }
        let need = gpus - chosen.count();
        chosen = chosen.union(same.lowest(need));
        if chosen.count() == gpus {
            return Some((at, chosen));
        }
    }
}

/// The cheapest subset of `items` (gain, cost, ..) whose gains reach `need`, as a bit mask over
/// `items`. A 0/1 knapsack over gains capped at `need`: O(items × need), items ≤ 64.
///
/// Ties go to fewer items, then to the lower mask. So when the cheapest item alone is enough, it is
/// the answer (a subset costs at least each of its members, costs being sums of non-negative
/// fields), and the knapsack is skipped: the common case of a small request on a busy host.
/// `cheapest` is the least cost among `items` (or less: then the shortcut finds nothing).
fn cheapest_subset(
    items: &[(u32, Cost, u32, GpuSet)],
    cheapest: Cost,
    need: u32,
) -> Option<(Cost, u64)> {
    let items = &items[..items.len().min(64)];
    if need == 0 {
        return Some((Cost::ZERO, 0));
    }
    if let Some(k) = items.iter().position(|i| i.1 == cheapest && i.0 >= need) {
        return Some((cheapest, 1u64 << k));
    }
    let need = need as usize;
    let mut best: [Option<(Cost, u32, u64)>; 65] = [None; 65];
    best[0] = Some((Cost::ZERO, 0, 0));
    for (k, &(gain, cost, _, _)) in items.iter().enumerate() {
        for have in (0..=need).rev() {
            let Some((c, n, mask)) = best[have] else {
                continue;
            };
            let reach = (have + gain as usize).min(need);
            let candidate = (c.plus(cost), n + 1, mask | (1u64 << k));
            if best[reach].is_none_or(|b| candidate < b) {
                best[reach] = Some(candidate);
            }
        }
    }
    best[need].map(|(cost, _, mask)| (cost, mask))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;

    #[test]
    fn cheapest_subset_prefers_one_big_cheap_victim_over_greedy_small_ones() {
        let cost = Cost::free_resumable_for_tests;
        let items = [
            (1, cost(10), 0, GpuSet::of(&[0])),
            (4, cost(20), 1, GpuSet::of(&[1, 2, 3, 4])),
        ];
        assert_eq!(cheapest_subset(&items, cost(10), 4), Some((cost(20), 0b10)));
        assert_eq!(cheapest_subset(&items, cost(10), 5), Some((cost(30), 0b11)));
        assert_eq!(cheapest_subset(&items, cost(10), 6), None);
    }

    #[test]
    fn first_to_free_takes_gpus_by_moment_then_index() {
        let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15u64);
        let mut next = |n: u64| rng.next_u64() % n;
        for _ in 0..2_000 {
            // Disjoint sets of GPUs of one 8-GPU host, each freed at one of a few moments.
            let mut moments: Vec<(Time, GpuSet)> = Vec::new();
            for g in 0..8 {
                if next(4) == 0 {
                    continue;
                }
                let at = next(3) as Time * 100;
                match moments.iter_mut().find(|m| m.0 == at && next(2) == 0) {
                    Some(m) => m.1 = m.1.union(GpuSet::of(&[g])),
                    None => moments.push((at, GpuSet::of(&[g]))),
                }
            }
            let gpus = 1 + next(8) as u32;
            // The reference: one entry per GPU, sorted by (moment, index).
            let mut each: Vec<(Time, u32)> = moments
                .iter()
                .flat_map(|&(at, set)| set.indices().map(move |g| (at, g)))
                .collect();
            each.sort_unstable();
            let expected = (each.len() >= gpus as usize).then(|| {
                let chosen = &each[..gpus as usize];
                let mask = GpuSet::of(&chosen.iter().map(|c| c.1).collect::<Vec<_>>());
                (chosen[chosen.len() - 1].0, mask)
            });
            assert_eq!(
                first_to_free(&mut moments, gpus),
                expected,
                "{gpus} of {moments:?}"
            );
        }
    }

    /// Every subset, least (cost, size, mask) first: what the knapsack and its shortcut must find.
    fn brute_force(items: &[(u32, Cost, u32, GpuSet)], need: u32) -> Option<(Cost, u64)> {
        (0..1u64 << items.len())
            .filter(|&m| {
                let gain: u32 = (0..items.len())
                    .filter(|k| m & (1 << k) != 0)
                    .map(|k| items[k].0)
                    .sum();
                gain >= need
            })
            .map(|m| {
                let cost = (0..items.len())
                    .filter(|k| m & (1 << k) != 0)
                    .fold(Cost::ZERO, |c, k| c.plus(items[k].1));
                (cost, m.count_ones(), m)
            })
            .min()
            .map(|(cost, _, m)| (cost, m))
    }

    #[test]
    fn cheapest_subset_matches_brute_force_with_or_without_its_shortcut() {
        let mut rng = Rng::new(0x2545_F491_4F6C_DD1Du64);
        let mut next = |n: u64| rng.next_u64() % n;
        for _ in 0..2_000 {
            let len = next(7) as usize;
            let items: Vec<_> = (0..len)
                .map(|k| {
                    // Few distinct costs, so that ties between items are common.
                    let cost = Cost::free_resumable_for_tests(1 + next(4) as i64);
                    (1 + next(4) as u32, cost, k as u32, GpuSet::EMPTY)
                })
                .collect();
            let need = next(10) as u32;
            let cheapest = items.iter().map(|i| i.1).min().unwrap_or(Cost::ZERO);
            assert_eq!(
                cheapest_subset(&items, cheapest, need),
                brute_force(&items, need),
                "{items:?} need {need}"
            );
        }
    }
}
