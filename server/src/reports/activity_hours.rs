//! The activity chart's measures hour by hour, worked out from the workloads' run history: how long
//! workloads waited in each hour (and on how many GPUs), the most that waited at once, the waits
//! of those that first started in it, and preemptions by rule. Hours add up into any bucket the
//! chart asks for (day, week), so finished hours are rolled up once (`activity_rollup`) and only
//! the last hour or two is worked out on each read.

use super::repo::ActiveWorkload;
use crate::ServerError;
use app::workloads::{reasons::StopRule, WorkloadState};
use scheduler::sim::{DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME};
use scheduler::HOUR;
use std::collections::BTreeMap;

/// One hour's activity. Seconds are whole, so hours add up exactly however they were split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HourActivity {
    /// Workload-seconds spent waiting in the hour.
    pub waited_s: i64,
    /// GPU-seconds those waiting workloads asked for.
    pub waited_gpu_s: i64,
    /// The most workloads waiting at one moment of the hour.
    pub peak: u32,
    /// The waits of the workloads that first started in the hour ([`FirstStart`], packed).
    pub waits: Vec<i64>,
    pub stops: BTreeMap<StopRule, u64>,
}

impl HourActivity {
    pub fn is_empty(&self) -> bool {
        self.waited_s == 0 && self.peak == 0 && self.waits.is_empty() && self.stops.is_empty()
    }
}

/// A first start's wait and what the chart classes it by, packed in one integer: the wait in
/// seconds, whether it is debug work (DESIGN §5), and its GPUs (large work is decided on read,
/// against the largest node then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstStart {
    pub wait_s: i64,
    pub debug: bool,
    pub gpus: i64,
}

const GPU_BITS: u32 = 15;
const GPU_MASK: i64 = (1 << GPU_BITS) - 1;

impl FirstStart {
    pub fn pack(self) -> i64 {
        (self.wait_s.max(0) << (GPU_BITS + 1))
            | (i64::from(self.debug) << GPU_BITS)
            | self.gpus.clamp(0, GPU_MASK)
    }

    pub fn unpack(packed: i64) -> FirstStart {
        FirstStart {
            wait_s: packed >> (GPU_BITS + 1),
            debug: (packed >> GPU_BITS) & 1 == 1,
            gpus: packed & GPU_MASK,
        }
    }
}

/// The spans a workload waited (DESIGN §5's waits and requeue waits alike): from submission to
/// its first run, from each run's end to the next run, and from its last run (or submission)
/// until now while it is queued, or until it was cancelled while queued. Runs are in start order;
/// gang members start together, and a later run opens a new wait only after every earlier one
/// ended. `ended_at` of a queued workload is ignored.
pub fn waiting_spans(w: &ActiveWorkload, runs: &[RunSpan], now: i64) -> Vec<(i64, i64)> {
    let mut spans = Vec::new();
    let mut queued_since = Some(w.submitted_at);
    for &(_, start, stop) in runs {
        if let Some(since) = queued_since.take() {
            if since < start {
                spans.push((since, start));
            }
        }
        queued_since = stop;
    }
    let until = match w.state {
        WorkloadState::Queued => Some(now),
        WorkloadState::Cancelled => Some(w.ended_at.unwrap_or(now)),
        _ => None,
    };
    if let (Some(since), Some(until)) = (queued_since, until) {
        if since < until {
            spans.push((since, until));
        }
    }
    spans
}

/// `(workload, started, ended)`: a run as the activity chart reads it.
pub type RunSpan = (i64, i64, Option<i64>);

/// Each workload with its runs; both lists are by workload id (runs of workloads not listed are
/// skipped, never misattributed).
fn with_runs<'a>(
    workloads: &'a [ActiveWorkload],
    runs: &'a [RunSpan],
) -> impl Iterator<Item = (&'a ActiveWorkload, &'a [RunSpan])> {
    let mut k = 0;
    workloads.iter().map(move |w| {
        while k < runs.len() && runs[k].0 < w.workload_id {
            k += 1;
        }
        let first = k;
        while k < runs.len() && runs[k].0 == w.workload_id {
            k += 1;
        }
        (w, &runs[first..k])
    })
}

/// The ids of the workloads waiting at `t` (a span began before it and ends after).
pub fn waiting_at(workloads: &[ActiveWorkload], runs: &[RunSpan], t: i64, now: i64) -> Vec<i64> {
    with_runs(workloads, runs)
        .filter(|(w, own)| {
            waiting_spans(w, own, now)
                .iter()
                .any(|&(a, b)| a < t && t < b)
        })
        .map(|(w, _)| w.workload_id)
        .collect()
}

/// The hours of `[from, to)` as of `now`, from the workloads alive in it (by id), their runs (by
/// workload, in start order) and the period's preemptions and drains `(at, detail)`. `from` and
/// `to` need not be whole hours: the first and last hour then hold only their part. Empty hours
/// are left out.
pub fn hours(
    workloads: &[ActiveWorkload],
    runs: &[RunSpan],
    stops: &[(i64, String)],
    from: i64,
    to: i64,
    now: i64,
) -> Result<BTreeMap<i64, HourActivity>, ServerError> {
    let mut out: BTreeMap<i64, HourActivity> = BTreeMap::new();
    let end = to.min(now);
    // Where each waiting span begins (+1) and ends (-1), for the peaks.
    let mut edges: Vec<(i64, i64)> = Vec::new();
    for (w, own) in with_runs(workloads, runs) {
        for (a, b) in waiting_spans(w, own, now) {
            let (mut t, b) = (a.max(from), b.min(end));
            if t >= b {
                continue;
            }
            edges.extend([(t, 1), (b, -1)]);
            while t < b {
                let hour = t.div_euclid(HOUR) * HOUR;
                let edge = (hour + HOUR).min(b);
                let cell = out.entry(hour).or_default();
                cell.waited_s += edge - t;
                cell.waited_gpu_s += w.gpus * (edge - t);
                t = edge;
            }
        }
        if let Some(first) = w.first_started_at.filter(|&f| f >= from && f < to) {
            let hour = first.div_euclid(HOUR) * HOUR;
            out.entry(hour).or_default().waits.push(
                FirstStart {
                    wait_s: first - w.submitted_at,
                    debug: w.min_runtime_s > 0
                        && w.min_runtime_s <= DEBUG_MAX_MIN_RUNTIME
                        && w.gpus <= i64::from(DEBUG_MAX_GPUS),
                    gpus: w.gpus,
                }
                .pack(),
            );
        }
    }
    add_peaks(&mut out, edges);
    /// All a stop's detail needs to say here.
    #[derive(serde::Deserialize)]
    struct Stopped {
        rule: StopRule,
    }
    for (at, detail) in stops {
        if *at < from || *at >= to {
            continue;
        }
        let rule = serde_json::from_str::<Stopped>(detail)
            .map_err(|error| sqlx::Error::Decode(Box::new(error)))?
            .rule;
        let hour = at.div_euclid(HOUR) * HOUR;
        *out.entry(hour).or_default().stops.entry(rule).or_default() += 1;
    }
    for cell in out.values_mut() {
        cell.waits.sort_unstable();
    }
    Ok(out)
}

/// Per hour, the most spans open at one moment, from their `(at, +1 | -1)` edges. A span ending
/// when another begins is not counted twice.
fn add_peaks(out: &mut BTreeMap<i64, HourActivity>, mut edges: Vec<(i64, i64)>) {
    edges.sort_unstable();
    let mut depth = 0i64;
    let mut k = 0;
    while k < edges.len() {
        let hour = edges[k].0.div_euclid(HOUR) * HOUR;
        // Open at the hour's start: what the previous edges left, after those at that very second.
        let mut most = if edges[k].0 == hour { 0 } else { depth };
        while k < edges.len() && edges[k].0 < hour + HOUR {
            let at = edges[k].0;
            while k < edges.len() && edges[k].0 == at {
                depth += edges[k].1;
                k += 1;
            }
            most = most.max(depth);
        }
        if most > 0 {
            let cell = out.entry(hour).or_default();
            cell.peak = cell.peak.max(most as u32);
        }
        // Whole hours with no edge between: what stayed open throughout is their peak.
        if depth > 0 {
            let next = edges
                .get(k)
                .map_or(hour + HOUR, |e| e.0.div_euclid(HOUR) * HOUR);
            let mut h = hour + HOUR;
            while h < next {
                let cell = out.entry(h).or_default();
                cell.peak = cell.peak.max(depth as u32);
                h += HOUR;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(id: i64, state: WorkloadState, submitted: i64) -> ActiveWorkload {
        ActiveWorkload {
            workload_id: id,
            gpus: 2,
            min_runtime_s: 600,
            state,
            submitted_at: submitted,
            first_started_at: None,
            ended_at: None,
        }
    }

    #[test]
    fn a_first_start_packs_and_unpacks_whole() {
        for s in [
            FirstStart {
                wait_s: 0,
                debug: true,
                gpus: 1,
            },
            FirstStart {
                wait_s: 400 * 86_400,
                debug: false,
                gpus: 512,
            },
        ] {
            assert_eq!(FirstStart::unpack(s.pack()), s);
        }
    }

    #[test]
    fn a_requeued_workload_cancelled_while_queued_waited_until_the_cancel() {
        let mut w = workload(1, WorkloadState::Cancelled, 0);
        w.ended_at = Some(500);
        let runs = [(1, 100, Some(200))];
        assert_eq!(waiting_spans(&w, &runs, 1_000), vec![(0, 100), (200, 500)]);
        let done = ActiveWorkload {
            state: WorkloadState::Succeeded,
            ..w
        };
        assert_eq!(waiting_spans(&done, &runs, 1_000), vec![(0, 100)]);
    }

    #[test]
    fn hours_split_however_add_up_to_the_same() {
        let mut a = workload(1, WorkloadState::Queued, 100);
        a.first_started_at = Some(4_000);
        let b = workload(2, WorkloadState::Queued, 3 * HOUR + 5);
        let runs = [(1, 4_000, Some(9_000))];
        let now = 6 * HOUR;
        let whole = hours(&[a.clone(), b.clone()], &runs, &[], 0, now, now).unwrap();
        let mut split = hours(&[a.clone(), b.clone()], &runs, &[], 0, 2 * HOUR, now).unwrap();
        split.extend(hours(&[a, b], &runs, &[], 2 * HOUR, now, now).unwrap());
        assert_eq!(whole, split);
        // Hour 0: workload 1 waited 3,500 s; hours 2 (from 9,000 s) to 5 it waits again, joined
        // by workload 2 in hour 3.
        assert_eq!(whole[&0].waited_s, 3_500);
        assert_eq!(whole[&(2 * HOUR)].waited_s, 3 * HOUR - 9_000);
        assert_eq!(whole[&(3 * HOUR)].peak, 2);
        assert_eq!(whole[&(4 * HOUR)].peak, 2);
        assert_eq!(whole[&(4 * HOUR)].waited_gpu_s, 2 * 2 * HOUR);
        assert_eq!(FirstStart::unpack(whole[&HOUR].waits[0]).wait_s, 3_900);
    }

    #[test]
    fn the_peak_counts_what_waited_at_once_not_the_average() {
        let mut out = BTreeMap::new();
        // 24 spans together for ten minutes in hour 0; one all through hours 1 and 2; two back to
        // back in hour 3.
        let mut edges: Vec<(i64, i64)> = (0..24).flat_map(|_| [(100, 1), (700, -1)]).collect();
        edges.extend([(HOUR, 1), (3 * HOUR, -1)]);
        edges.extend([
            (3 * HOUR + 10, 1),
            (3 * HOUR + 20, -1),
            (3 * HOUR + 20, 1),
            (3 * HOUR + 30, -1),
        ]);
        add_peaks(&mut out, edges);
        let peaks: Vec<(i64, u32)> = out.iter().map(|(h, c)| (*h / HOUR, c.peak)).collect();
        assert_eq!(peaks, vec![(0, 24), (1, 1), (2, 1), (3, 1)]);
    }
}
