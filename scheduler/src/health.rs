//! Hosts leaving service (DESIGN §4.9): nothing new lands on a cordoned or unhealthy host, and each
//! workload there is drained as soon as its protection ends; a down host loses its work at once.

use crate::cluster::Health;
use crate::ids::{NodeId, Time};
use crate::pool::{Pool, Run};
use crate::reasons::{Action, AfterStop, DrainReason, DrainRule, Party};
use crate::snapshot::WorkloadSpec;

/// Drains what must go now, in workload-id order. Returns the earliest time a protected workload
/// on a failing host must be drained, if any.
pub(crate) fn drain_hosts(
    pool: &mut Pool,
    party: &dyn Fn(&WorkloadSpec) -> Party,
    protected_until: &dyn Fn(&Run) -> Option<Time>,
    actions: &mut Vec<Action>,
) -> Option<Time> {
    let mut wake: Option<Time> = None;
    // Only runs touching a host out of service can drain; on a healthy cluster there are none.
    let mut order: Vec<u32> = (0..pool.slots.len())
        .filter(|&n| pool.slots[n].health != Health::Healthy)
        .flat_map(|n| pool.slot_runs(n).iter().map(|&(run, _)| run))
        .collect();
    if order.is_empty() {
        return None;
    }
    order.sort_by_key(|&r| pool.runs[r as usize].spec.id);
    order.dedup();
    for run in order {
        let Some((node, health)) = worst_host(pool, run) else {
            continue;
        };
        let r = &pool.runs[run as usize];
        let rule = match health {
            Health::Down => DrainRule::HostDown,
            Health::Unhealthy => DrainRule::HostUnhealthy,
            Health::Cordoned => DrainRule::HostCordoned,
            Health::Healthy => continue,
        };
        let until = protected_until(r);
        if rule != DrainRule::HostDown {
            if let Some(until) = until {
                if until != Time::MAX {
                    wake = Some(wake.map_or(until, |w| w.min(until)));
                }
                continue;
            }
        }
        let then = match (rule, r.spec.resumable) {
            (_, true) => AfterStop::Requeue,
            (DrainRule::HostDown, false) => AfterStop::Fail,
            (_, false) => AfterStop::EndPreempted,
        };
        actions.push(Action::Drain {
            workload: r.spec.id,
            reason: DrainReason {
                rule,
                at: pool.now,
                node,
                victim: party(&r.spec),
                victim_min_runtime: r.spec.min_runtime,
                victim_protected_until: r.protected_until,
            },
            then,
        });
        pool.release(run);
    }
    wake
}

/// The least healthy host the run touches, if it is not healthy.
fn worst_host(pool: &Pool, run: u32) -> Option<(NodeId, Health)> {
    pool.parts_of(run)
        .iter()
        .map(|p| (pool.slots[p.node.index()].health, p.node))
        .filter(|(h, _)| *h != Health::Healthy)
        .max_by_key(|&(h, node)| (h, std::cmp::Reverse(node)))
        .map(|(h, node)| (node, h))
}
