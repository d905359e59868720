//! The usage ledger: charged GPU-seconds per tree node over a sliding window, and the GPU time each
//! node was funded for over the same window.
//!
//! Two drivers feed it. The simulator opens and closes charge *rates* as allocated workloads start
//! and stop ([`Ledger::start_charging`]), so nothing is touched per running workload per event. The
//! server replays closed records such as hourly buckets from its database ([`Ledger::charge`]).
//! Both land in fixed-width buckets holding cumulative sums, so a window query costs O(1) per node
//! and a charge at the present costs O(depth). Every charge is booked on the leaf and on each of its
//! ancestors, so a node's usage is read directly and the tree's totals agree by construction.
//!
//! The window's trailing edge usually falls inside a bucket; that bucket is taken as evenly spread,
//! so a query is exact to within one bucket's charge. Buckets older than the window are dropped:
//! queries are meant for times at or after the latest charge, minus the window.

use std::collections::VecDeque;

use crate::decayed::Decayed;
use crate::ids::{BudgetId, Time, DAY, HOUR};
use crate::tree::BudgetTree;

/// How far back usage counts and how finely it is kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedgerConfig {
    /// The lookback window `W`. Default 7 days.
    pub window: Time,
    /// Bucket width; the trailing edge of the window is exact to one bucket. Default 1 hour,
    /// the width the server stores.
    pub bucket: Time,
    /// Half-life of the decayed usage the SLURM peer ranks by ([`Ledger::decayed_usage`];
    /// SLURM's `PriorityDecayHalfLife`). Default 7 days, SLURM's default.
    pub decay_half_life: Time,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            window: 7 * DAY,
            bucket: HOUR,
            decay_half_life: 7 * DAY,
        }
    }
}

/// Charged time and healthy capacity over time. See the module docs.
#[derive(Clone, Debug)]
pub struct Ledger {
    config: LedgerConfig,
    parent: Vec<Option<BudgetId>>,
    series: Vec<Series>,
    decayed: Vec<Decayed>,
    capacity: Capacity,
}

impl Ledger {
    /// An empty ledger for `tree`'s nodes. Capacity is 0 until [`Ledger::set_capacity`]; setting it
    /// at `start - window` makes a fresh cluster look as if it had been idle for a full window.
    pub fn new(tree: &BudgetTree, config: LedgerConfig) -> Ledger {
        assert!(
            config.bucket > 0 && config.window >= config.bucket,
            "the bucket must be positive and no longer than the window"
        );
        assert!(config.decay_half_life > 0, "the half-life must be positive");
        let retain = (config.window / config.bucket + 2) as usize;
        Ledger {
            config,
            parent: tree.parents().to_vec(),
            series: vec![Series::new(retain); tree.len()],
            decayed: vec![Decayed::new(); tree.len()],
            capacity: Capacity::default(),
        }
    }

    pub fn config(&self) -> LedgerConfig {
        self.config
    }

    /// Books `gpu_seconds` to `leaf` (and its ancestors), spread evenly over `[from, to)`.
    /// Suits closed records: an hourly bucket, a finished run segment, a late agent report.
    pub fn charge(&mut self, leaf: BudgetId, from: Time, to: Time, gpu_seconds: f64) {
        let bucket = self.config.bucket;
        self.for_path(leaf, |s| s.add_spread(from, to, gpu_seconds, bucket));
        let half_life = self.config.decay_half_life;
        self.for_path_decayed(leaf, |d| d.add_spread(from, to, gpu_seconds, half_life));
    }

    /// From `at` on, `leaf` is charged `gpus` GPU-seconds per second until a matching
    /// [`Ledger::stop_charging`]. Rates add up, so call it once per workload start.
    pub fn start_charging(&mut self, leaf: BudgetId, gpus: u32, at: Time) {
        self.change_rate(leaf, f64::from(gpus), at);
    }

    /// Ends a rate opened by [`Ledger::start_charging`] at `at` (which may be in the past: the
    /// time between is taken back).
    pub fn stop_charging(&mut self, leaf: BudgetId, gpus: u32, at: Time) {
        self.change_rate(leaf, -f64::from(gpus), at);
    }

    fn change_rate(&mut self, leaf: BudgetId, delta: f64, at: Time) {
        let bucket = self.config.bucket;
        self.for_path(leaf, |s| s.change_rate(delta, at, bucket));
        let half_life = self.config.decay_half_life;
        self.for_path_decayed(leaf, |d| d.change_rate(delta, at, half_life));
    }

    /// The healthy capacity (GPUs) from `at` on. Record every change: a node going down,
    /// coming back, being added.
    pub fn set_capacity(&mut self, at: Time, gpus: u32) {
        self.capacity.set(at, f64::from(gpus));
        let horizon = at - self.config.window - 2 * self.config.bucket;
        self.capacity.forget_before(horizon);
    }

    /// Healthy capacity in force at `t`.
    pub fn capacity_at(&self, t: Time) -> u32 {
        self.capacity.at(t) as u32
    }

    /// GPU-seconds charged to `node` within `(now - window, now]`.
    pub fn usage(&self, node: BudgetId, now: Time) -> f64 {
        self.usage_within(node, now, self.config.window)
    }

    /// GPU-seconds charged to `node` within `(now - window, now]`, for a window no longer than
    /// the ledger's.
    pub fn usage_within(&self, node: BudgetId, now: Time, window: Time) -> f64 {
        let bucket = self.config.bucket;
        let s = &self.series[node.index()];
        (s.total_at(now) - s.interpolated(now - window.min(self.config.window), bucket)).max(0.0)
    }

    /// GPU-seconds charged to `node` up to `now`, each decayed by its age with the configured
    /// half-life (no window): SLURM's usage, read by the SLURM peer's fair-share factor.
    pub fn decayed_usage(&self, node: BudgetId, now: Time) -> f64 {
        self.decayed[node.index()].at(now, self.config.decay_half_life)
    }

    /// GPU-seconds ever charged to `node` up to `now`, window or not.
    pub fn charged_total(&self, node: BudgetId, now: Time) -> f64 {
        self.series[node.index()].lifetime_at(now)
    }

    /// The GPU time `node` was funded for over the window ending at `now`: the integral of
    /// `f(node) · C` with the shares and capacity in force at each moment.
    pub fn allocated(&self, tree: &BudgetTree, node: BudgetId, now: Time) -> f64 {
        self.allocated_all(tree, now)[node.index()]
    }

    /// [`Ledger::allocated`] for every node at once: O(share versions in the window × nodes).
    pub fn allocated_all(&self, tree: &BudgetTree, now: Time) -> Vec<f64> {
        self.allocated_all_within(tree, now, self.config.window)
    }

    /// [`Ledger::allocated_all`] over a window no longer than the ledger's.
    pub fn allocated_all_within(&self, tree: &BudgetTree, now: Time, window: Time) -> Vec<f64> {
        let mut out = Vec::new();
        self.allocated_all_into(tree, now, window, &mut out);
        out
    }

    /// [`Ledger::allocated_all_within`] into `out`, reusing its allocation.
    pub(crate) fn allocated_all_into(
        &self,
        tree: &BudgetTree,
        now: Time,
        window: Time,
        out: &mut Vec<f64>,
    ) {
        let start = now - window.min(self.config.window);
        let versions = tree.versions();
        out.clear();
        out.resize(tree.len(), 0.0);
        for (i, version) in versions.iter().enumerate() {
            let from = version.effective_from.max(start);
            let to = versions
                .get(i + 1)
                .map_or(now, |next| next.effective_from.min(now));
            if to <= from {
                continue;
            }
            let gpu_seconds = self.capacity.integral(to) - self.capacity.integral(from);
            for (slot, fraction) in out.iter_mut().zip(version.fractions()) {
                *slot += fraction * gpu_seconds;
            }
        }
    }

    fn for_path_decayed(&mut self, leaf: BudgetId, mut apply: impl FnMut(&mut Decayed)) {
        let mut at = Some(leaf);
        while let Some(node) = at {
            apply(&mut self.decayed[node.index()]);
            at = self.parent[node.index()];
        }
    }

    fn for_path(&mut self, leaf: BudgetId, mut apply: impl FnMut(&mut Series)) {
        let mut at = Some(leaf);
        while let Some(node) = at {
            apply(&mut self.series[node.index()]);
            at = self.parent[node.index()];
        }
    }
}

/// One node's charges: cumulative totals at the end of each retained bucket, plus an open rate.
#[derive(Clone, Debug)]
struct Series {
    retain: usize,
    /// Bucket index of `cum[0]`.
    first: i64,
    /// Cumulative total at the start of bucket `first`.
    base: f64,
    cum: VecDeque<f64>,
    rate: f64,
    /// The open rate has been folded into buckets up to here.
    since: Time,
    lifetime: f64,
}

impl Series {
    fn new(retain: usize) -> Series {
        Series {
            retain,
            first: 0,
            base: 0.0,
            cum: VecDeque::new(),
            rate: 0.0,
            since: Time::MIN,
            lifetime: 0.0,
        }
    }

    fn change_rate(&mut self, delta: f64, at: Time, bucket: Time) {
        if self.since == Time::MIN {
            self.since = at;
        }
        if at >= self.since {
            let folded = self.rate * (at - self.since) as f64;
            if folded != 0.0 {
                self.add_spread(self.since, at, folded, bucket);
            }
            self.since = at;
        } else {
            // A change dated before what is already folded: book the difference retroactively.
            self.add_spread(at, self.since, delta * (self.since - at) as f64, bucket);
        }
        self.rate += delta;
        if self.rate.abs() < 1e-9 {
            self.rate = 0.0;
        }
    }

    fn add_spread(&mut self, from: Time, to: Time, amount: f64, bucket: Time) {
        self.lifetime += amount;
        if to <= from {
            self.add_to_bucket(from.div_euclid(bucket), amount);
            return;
        }
        let span = (to - from) as f64;
        let last = (to - 1).div_euclid(bucket);
        // Charges older than what is retained cannot reach any window still queried.
        let lowest = last - self.retain as i64;
        let mut k = from.div_euclid(bucket).max(lowest);
        while k <= last {
            let lo = from.max(k * bucket);
            let hi = to.min((k + 1) * bucket);
            if hi > lo {
                self.add_to_bucket(k, amount * (hi - lo) as f64 / span);
            }
            k += 1;
        }
    }

    fn add_to_bucket(&mut self, k: i64, amount: f64) {
        if self.cum.is_empty() {
            self.first = k;
        }
        if k < self.first {
            return;
        }
        let mut last_total = self.cum.back().copied().unwrap_or(self.base);
        while self.first + self.cum.len() as i64 <= k {
            self.cum.push_back(last_total);
            last_total = *self.cum.back().expect("just pushed");
        }
        let start = (k - self.first) as usize;
        for total in self.cum.iter_mut().skip(start) {
            *total += amount;
        }
        while self.cum.len() > self.retain {
            self.base = self.cum.pop_front().expect("longer than retain");
            self.first += 1;
        }
    }

    fn folded_total(&self) -> f64 {
        self.cum.back().copied().unwrap_or(self.base)
    }

    fn lifetime_at(&self, now: Time) -> f64 {
        self.lifetime + self.open_part(now)
    }

    fn open_part(&self, t: Time) -> f64 {
        if self.since == Time::MIN || t <= self.since {
            0.0
        } else {
            self.rate * (t - self.since) as f64
        }
    }

    /// Everything charged up to `now`, up to a constant that cancels in window differences.
    fn total_at(&self, now: Time) -> f64 {
        self.folded_total() + self.open_part(now)
    }

    /// Everything charged before bucket boundary `k * bucket`, exactly.
    fn at_boundary(&self, k: i64, bucket: Time) -> f64 {
        let folded = if self.cum.is_empty() || k <= self.first {
            self.base
        } else {
            let last = (k - self.first - 1) as usize;
            self.cum
                .get(last)
                .copied()
                .unwrap_or_else(|| self.folded_total())
        };
        folded + self.open_part(k * bucket)
    }

    /// Everything charged before `t`, taking the bucket around `t` as evenly spread. Linear in the
    /// charges, so a parent's value is exactly the sum of its children's.
    fn interpolated(&self, t: Time, bucket: Time) -> f64 {
        let k = t.div_euclid(bucket);
        let lo = self.at_boundary(k, bucket);
        let hi = self.at_boundary(k + 1, bucket);
        lo + (hi - lo) * (t - k * bucket) as f64 / bucket as f64
    }
}

/// Healthy capacity as a step function, with its running integral at each step.
#[derive(Clone, Debug, Default)]
struct Capacity {
    /// `(from, gpus, integral up to from)`, sorted by time.
    steps: Vec<(Time, f64, f64)>,
}

impl Capacity {
    fn set(&mut self, at: Time, gpus: f64) {
        let pos = self.steps.partition_point(|s| s.0 < at);
        if self.steps.get(pos).is_some_and(|s| s.0 == at) {
            self.steps[pos].1 = gpus;
        } else {
            self.steps.insert(pos, (at, gpus, 0.0));
        }
        for i in pos.max(1)..self.steps.len() {
            let (t0, g0, i0) = self.steps[i - 1];
            self.steps[i].2 = i0 + g0 * (self.steps[i].0 - t0) as f64;
        }
    }

    fn forget_before(&mut self, horizon: Time) {
        let keep_from = self
            .steps
            .partition_point(|s| s.0 <= horizon)
            .saturating_sub(1);
        if keep_from > 0 {
            self.steps.drain(..keep_from);
        }
    }

    fn at(&self, t: Time) -> f64 {
        let after = self.steps.partition_point(|s| s.0 <= t);
        if after == 0 {
            0.0
        } else {
            self.steps[after - 1].1
        }
    }

    fn integral(&self, t: Time) -> f64 {
        let after = self.steps.partition_point(|s| s.0 <= t);
        if after == 0 {
            return self.steps.first().map_or(0.0, |s| s.2);
        }
        let (from, gpus, before) = self.steps[after - 1];
        before + gpus * (t - from) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> BudgetTree {
        BudgetTree::from_paths([("p", 1.0), ("p/x", 1.0), ("p/y", 3.0), ("q", 1.0)]).unwrap()
    }

    #[test]
    fn usage_counts_only_the_lookback_window() {
        let tree = tree();
        let x = tree.find("p/x").unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.charge(x, 0, HOUR, 3_600.0);
        ledger.charge(x, 2 * DAY, 2 * DAY + HOUR, 7_200.0);
        assert_eq!(ledger.usage(x, 3 * DAY), 10_800.0);
        assert_eq!(ledger.usage(x, 7 * DAY + HOUR), 7_200.0);
        assert_eq!(ledger.usage(x, 10 * DAY), 0.0);
    }

    #[test]
    fn open_rates_charge_the_leaf_and_every_ancestor() {
        let tree = tree();
        let (x, p) = (tree.find("p/x").unwrap(), tree.find("p").unwrap());
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.start_charging(x, 8, 100);
        assert_eq!(ledger.usage(x, 200), 800.0);
        ledger.stop_charging(x, 8, 1_100);
        assert_eq!(ledger.usage(x, 5_000), 8_000.0);
        assert_eq!(ledger.usage(p, 5_000), 8_000.0);
        assert_eq!(ledger.usage(BudgetId::ROOT, 5_000), 8_000.0);
        assert_eq!(ledger.charged_total(BudgetId::ROOT, 9 * DAY), 8_000.0);
    }

    #[test]
    fn a_stop_dated_in_the_past_takes_the_extra_time_back() {
        let tree = tree();
        let x = tree.find("p/x").unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.start_charging(x, 2, 0);
        ledger.start_charging(x, 1, 1_000);
        ledger.stop_charging(x, 2, 500);
        ledger.stop_charging(x, 1, 1_000);
        assert_eq!(ledger.usage(x, 2_000), 1_000.0);
    }

    #[test]
    fn the_trailing_edge_is_exact_to_one_bucket() {
        let tree = tree();
        let x = tree.find("p/x").unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.start_charging(x, 1, 0);
        let now = 8 * DAY + 1_800;
        assert!((ledger.usage(x, now) - (7 * DAY) as f64).abs() < 1e-6);
        ledger.stop_charging(x, 1, now);
        assert!((ledger.usage(x, now) - (7 * DAY) as f64).abs() < 1e-6);
    }

    #[test]
    fn allocated_integrates_shares_and_capacity_as_they_were() {
        let mut tree = tree();
        let (y, q) = (tree.find("p/y").unwrap(), tree.find("q").unwrap());
        tree.add_version(DAY, [(q, 3.0)]).unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.set_capacity(0, 100);
        ledger.set_capacity(DAY / 2, 50);
        // Day 0: q = 1/2 of 100 then 50 GPUs; day 1: q = 3/4 of 50 GPUs.
        let expected_q = 0.5 * 100.0 * 43_200.0 + 0.5 * 50.0 * 43_200.0 + 0.75 * 50.0 * 86_400.0;
        assert!((ledger.allocated(&tree, q, 2 * DAY) - expected_q).abs() < 1e-6);
        let expected_y = 0.375 * (100.0 * 43_200.0 + 50.0 * 43_200.0) + 0.1875 * 50.0 * 86_400.0;
        assert!((ledger.allocated(&tree, y, 2 * DAY) - expected_y).abs() < 1e-6);
        assert_eq!(ledger.capacity_at(DAY), 50);
    }

    #[test]
    fn allocated_is_fraction_times_capacity_times_window_when_nothing_changed() {
        let tree = tree();
        let q = tree.find("q").unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.set_capacity(-7 * DAY, 64);
        let expected = 0.5 * 64.0 * (7 * DAY) as f64;
        assert!((ledger.allocated(&tree, q, 0) - expected).abs() < 1e-6);
        assert!((ledger.allocated(&tree, q, 30 * DAY) - expected).abs() < 1e-6);
    }
}
