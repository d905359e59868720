//! A reference point for occupancy that keeps work rigid: every workload runs on exactly its GPUs
//! for exactly its duration, once, from the moment it is submitted. The cluster is one pool of
//! healthy GPUs (no hosts, so no packing), and whenever GPUs are free the earliest-submitted
//! workload that fits starts — no priorities, no shares, no preemption. It describes the input:
//! when the divisible limit reads 100% but this reads 90%, the missing tenth is work that was not
//! there yet or could not be split, not GPUs an engine left idle.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use super::SimInput;
use crate::ids::Time;

/// GPU-seconds busy in `[0, horizon]` under the rigid greedy reference.
pub fn rigid_greedy_busy(input: &SimInput, horizon: Time) -> f64 {
    let cluster = &input.cluster;
    let mut arrivals: Vec<(Time, usize)> = input
        .trace
        .iter()
        .enumerate()
        .filter(|(_, r)| r.submit <= horizon)
        .map(|(i, r)| (r.submit.max(0), i))
        .collect();
    arrivals.sort_unstable();
    let mut changes: Vec<(Time, i64)> = Vec::new();
    for o in &cluster.outages {
        let gpus = i64::from(cluster.nodes[o.node.0 as usize].gpus);
        changes.push((o.from.clamp(0, horizon), -gpus));
        changes.push((o.to.clamp(0, horizon), gpus));
    }
    changes.sort_unstable();

    let mut capacity = i64::from(cluster.total_gpus());
    let mut used: i64 = 0;
    let mut ends: BinaryHeap<Reverse<(Time, i64)>> = BinaryHeap::new();
    // Waiting work by width, each width in submit order.
    let mut waiting: BTreeMap<i64, VecDeque<(Time, usize)>> = BTreeMap::new();
    let (mut next_arrival, mut next_change) = (0, 0);
    let (mut t, mut busy) = (0, 0.0f64);
    while t < horizon {
        while let Some(&Reverse((end, gpus))) = ends.peek() {
            if end > t {
                break;
            }
            ends.pop();
            used -= gpus;
        }
        while next_change < changes.len() && changes[next_change].0 <= t {
            capacity += changes[next_change].1;
            next_change += 1;
        }
        while next_arrival < arrivals.len() && arrivals[next_arrival].0 <= t {
            let (at, i) = arrivals[next_arrival];
            let row = &input.trace[i];
            if row.duration > 0 {
                waiting
                    .entry(i64::from(row.gpus))
                    .or_default()
                    .push_back((at, i));
            }
            next_arrival += 1;
        }
        // The earliest-submitted waiting workload that fits, until none does.
        loop {
            let free = capacity - used;
            let pick = waiting
                .range(..=free)
                .filter_map(|(width, queue)| queue.front().map(|head| (*head, *width)))
                .min();
            let Some((_, width)) = pick else { break };
            let (_, i) = waiting
                .get_mut(&width)
                .and_then(VecDeque::pop_front)
                .unwrap();
            used += width;
            ends.push(Reverse((t + input.trace[i].duration, width)));
        }
        let next = [
            ends.peek().map(|Reverse((end, _))| *end),
            arrivals.get(next_arrival).map(|a| a.0),
            changes.get(next_change).map(|c| c.0),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(horizon)
        .min(horizon);
        busy += used.min(capacity).max(0) as f64 * (next - t) as f64;
        t = next;
    }
    busy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TRACE_HEADER;

    fn busy(rows: &[&str], horizon: Time) -> f64 {
        let trace = format!("{TRACE_HEADER}\n{}\n", rows.join("\n"));
        let cluster = "[[nodes]]\ncount = 1\ngpus_per_node = 8\n";
        let input = SimInput::parse("[shares]\na = 1\n", cluster, &trace).unwrap();
        rigid_greedy_busy(&input, horizon)
    }

    #[test]
    fn one_long_one_gpu_workload_keeps_one_gpu_busy_however_much_work_it_carries() {
        assert_eq!(busy(&["w1,0,a,,1,800,0,true,0"], 100), 100.0);
    }

    #[test]
    fn the_earliest_workload_that_fits_starts_when_gpus_free_up() {
        // 6 GPUs from 0 to 100; the 4-GPU one waits for them, the later 2-GPU one fits at once.
        let rows = [
            "w1,0,a,,6,100,0,true,0",
            "w2,10,a,,4,50,0,true,0",
            "w3,20,a,,2,30,0,true,0",
        ];
        assert_eq!(busy(&rows, 200), 600.0 + 200.0 + 60.0);
    }
}
