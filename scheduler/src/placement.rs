//! Where a workload can go (DESIGN §4.8): best fit on one host, whole hosts for a gang, and, when
//! neither works now, the earliest moment it could, for a reservation.

use crate::cluster::{GpuSet, NodeGpus, Placement};
use crate::ids::Time;
use crate::pool::{Cost, Held, Pool, Run};

/// A way to place a workload: its GPUs and whom to preempt for them.
#[derive(Clone, Debug)]
pub(crate) struct Choice {
    pub placement: Placement,
    pub victims: Vec<u32>,
}

/// The rules one search runs under.
pub(crate) struct Rules<'a> {
    pub may_backfill: &'a dyn Fn(&Held) -> bool,
    /// `None`: idle GPUs only. Otherwise, whether a live run may be preempted now.
    pub victim: Option<&'a dyn Fn(&Run) -> bool>,
    /// Look only at these hosts (ascending), for single-host placements.
    pub only: Option<&'a [usize]>,
}

impl Pool {
    /// The cheapest way to place `gpus` now, or `None`.
    pub(crate) fn find(&self, gpus: u32, rules: &Rules<'_>) -> Option<Choice> {
        self.find_or_reach(gpus, rules).ok()
    }

    /// As [`Pool::find`]; a gang that does not fit reports how many GPUs its usable hosts hold.
    pub(crate) fn find_or_reach(&self, gpus: u32, rules: &Rules<'_>) -> Result<Choice, u32> {
        if gpus <= self.node_size {
            self.find_single(gpus, rules).ok_or(0)
        } else {
            self.find_gang(gpus, rules)
        }
    }

    /// Best fit on one host: least cost, then fewest idle GPUs left over, then lowest host.
    fn find_single(&self, gpus: u32, rules: &Rules<'_>) -> Option<Choice> {
        let mut best: Option<(Cost, u32, usize, GpuSet, Vec<u32>)> = None;
        let mut items: Vec<(u32, Cost, u32, GpuSet)> = Vec::new();
        let everywhere = 0..self.slots.len();
        let nodes: &mut dyn Iterator<Item = usize> = match rules.only {
            Some(only) => &mut only.iter().copied(),
            None => &mut everywhere.clone(),
        };
        for node in nodes {
            let slot = &self.slots[node];
            if !slot.schedulable() || slot.all.count() < gpus {
                continue;
            }
            let usable = self.usable(node, rules.may_backfill);
            let free = slot.free.intersection(usable);
            if free.count() >= gpus {
                let leftover = free.count() - gpus;
                if best
                    .as_ref()
                    .is_none_or(|b| (Cost::ZERO, leftover) < (b.0, b.1))
                {
                    best = Some((Cost::ZERO, leftover, node, free.lowest(gpus), Vec::new()));
                    if leftover == 0 {
                        break;
                    }
                }
                continue;
            }
            let Some(victim_ok) = rules.victim else {
                continue;
            };
            items.clear();
            let mut reachable = free.count();
            for &(run, held) in self.slot_runs(node) {
                let r = &self.runs[run as usize];
                let gain = held.intersection(usable);
                if r.alive && !r.fresh && !gain.is_empty() && victim_ok(r) {
                    reachable += gain.count();
                    items.push((gain.count(), r.cost, run, gain));
                }
            }
            if reachable < gpus {
                continue;
            }
            let Some((cost, chosen)) = cheapest_subset(&items, gpus - free.count()) else {
                continue;
            };
            let mut gained = free;
            let mut victims = Vec::new();
            for (k, item) in items.iter().enumerate() {
                if chosen & (1u64 << k) != 0 {
                    gained = gained.union(item.3);
                    victims.push(item.2);
                }
            }
            let leftover = gained.count() - gpus;
            if best.as_ref().is_none_or(|b| (cost, leftover) < (b.0, b.1)) {
                best = Some((cost, leftover, node, gained.lowest(gpus), victims));
            }
        }
        best.map(|(_, _, node, gpus, victims)| Choice {
            placement: Placement::on(Pool::node_id(node), gpus),
            victims,
        })
    }

    /// Whole hosts, cheapest first, until they hold `gpus`.
    fn find_gang(&self, gpus: u32, rules: &Rules<'_>) -> Result<Choice, u32> {
        let mut hosts: Vec<(Cost, usize)> = Vec::new();
        let mut reachable = 0;
        for (node, slot) in self.slots.iter().enumerate() {
            if !slot.schedulable() || self.usable(node, rules.may_backfill) != slot.all {
                continue;
            }
            let cost = if slot.free == slot.all {
                Some(Cost::ZERO)
            } else if let Some(victim_ok) = rules.victim {
                self.slot_runs(node)
                    .iter()
                    .try_fold(Cost::ZERO, |sum, &(run, _)| {
                        let r = &self.runs[run as usize];
                        match (r.alive, r.alive && !r.fresh && victim_ok(r)) {
                            (false, _) => Some(sum),
                            (true, true) => Some(sum.plus(r.cost)),
                            (true, false) => None,
                        }
                    })
            } else {
                None
            };
            if let Some(cost) = cost {
                reachable += slot.all.count();
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
            total += slot.all.count();
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

    /// The earliest moment `gpus` could start on hosts no one has reserved, if every live run
    /// `eventually` says yes to were preempted as soon as its protection ends. `None` if never.
    pub(crate) fn earliest(
        &self,
        gpus: u32,
        eventually: &dyn Fn(&Run) -> bool,
    ) -> Option<(Time, Vec<NodeGpus>)> {
        let mut hosts: Vec<(Time, usize, GpuSet)> = Vec::new();
        let mut times: Vec<(Time, u32)> = Vec::new();
        let single = gpus <= self.node_size;
        for (node, slot) in self.slots.iter().enumerate() {
            if !slot.schedulable()
                || slot.reservation.is_some()
                || (single && slot.all.count() < gpus)
            {
                continue;
            }
            times.clear();
            times.extend(slot.free.indices().map(|g| (self.now, g)));
            let mut blocked = GpuSet::EMPTY;
            for &(run, held) in self.slot_runs(node) {
                let r = &self.runs[run as usize];
                if !r.alive {
                    continue;
                }
                if eventually(r) {
                    let at = r.protected_until.unwrap_or(self.now).max(self.now);
                    times.extend(held.indices().map(|g| (at, g)));
                } else {
                    blocked = blocked.union(held);
                }
            }
            if single {
                if (times.len() as u32) < gpus {
                    continue;
                }
                times.sort_unstable();
                let chosen = &times[..gpus as usize];
                let mask = GpuSet::of(&chosen.iter().map(|t| t.1).collect::<Vec<_>>());
                hosts.push((chosen[chosen.len() - 1].0, node, mask));
            } else if blocked.is_empty() {
                let at = times.iter().map(|t| t.0).max().unwrap_or(self.now);
                hosts.push((at, node, slot.all));
            }
        }
        hosts.sort_unstable_by_key(|h| (h.0, h.2.count(), h.1));
        let mut parts = Vec::new();
        let mut total = 0;
        let mut at = self.now;
        for &(t, node, mask) in &hosts {
            if total >= gpus {
                break;
            }
            total += mask.count();
            at = at.max(t);
            parts.push(NodeGpus {
                node: Pool::node_id(node),
                gpus: mask,
            });
        }
        if total < gpus {
            return None;
        }
        parts.sort_unstable();
        Some((at, parts))
    }
}

/// The cheapest subset of `items` (gain, cost, ..) whose gains reach `need`, as a bit mask over
/// `items`. A 0/1 knapsack over gains capped at `need`: O(items × need), items ≤ 64.
fn cheapest_subset(items: &[(u32, Cost, u32, GpuSet)], need: u32) -> Option<(Cost, u64)> {
    let need = need as usize;
    let mut best: [Option<(Cost, u32, u64)>; 65] = [None; 65];
    best[0] = Some((Cost::ZERO, 0, 0));
    for (k, &(gain, cost, _, _)) in items.iter().enumerate().take(64) {
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

    #[test]
    fn cheapest_subset_prefers_one_big_cheap_victim_over_greedy_small_ones() {
        let cost = Cost::free_resumable_for_tests;
        let items = [
            (1, cost(10), 0, GpuSet::of(&[0])),
            (4, cost(20), 1, GpuSet::of(&[1, 2, 3, 4])),
        ];
        assert_eq!(cheapest_subset(&items, 4), Some((cost(20), 0b10)));
        assert_eq!(cheapest_subset(&items, 5), Some((cost(30), 0b11)));
        assert_eq!(cheapest_subset(&items, 6), None);
    }
}
