//! Usage decayed with a half-life, as SLURM's multifactor plugin keeps it
//! (`PriorityDecayHalfLife`, <https://slurm.schedmd.com/priority_multifactor.html>): a GPU-second
//! charged `a` seconds ago counts `2^(-a / half_life)`. Read only by the SLURM peer
//! ([`crate::Policy::Slurm`]).
//!
//! Kept exactly, in O(1) per change: a value at a reference moment, and the open charge rate since.
//! A rate `r` held over `[a, b]` is worth `r · I(b - a)` at `b`, with
//! `I(d) = (h / ln 2) · (1 - 2^(-d / h))` — the integral of the decay over the span — and a value
//! decays by `2^(-d / h)` over `d` seconds. SLURM decays in steps every `PriorityCalcPeriod` (5
//! minutes); this is the limit of those steps.

use crate::ids::Time;

/// One node's decayed usage.
#[derive(Clone, Debug)]
pub(crate) struct Decayed {
    /// Decayed GPU-seconds at `at`.
    value: f64,
    /// GPU-seconds per second charged since `at`.
    rate: f64,
    at: Time,
}

impl Decayed {
    pub(crate) fn new() -> Decayed {
        Decayed {
            value: 0.0,
            rate: 0.0,
            at: Time::MIN,
        }
    }

    /// Moves the reference moment forward to `to` (never back).
    fn advance(&mut self, to: Time, half_life: Time) {
        if self.at == Time::MIN {
            self.at = to;
            return;
        }
        if to <= self.at {
            return;
        }
        let d = to - self.at;
        self.value = self.value * decay(d, half_life) + self.rate * integral(d, half_life);
        self.at = to;
    }

    /// The charge rate changes by `delta` from `at` on (which may be in the past: the time between
    /// is booked, or taken back, as it would have decayed).
    pub(crate) fn change_rate(&mut self, delta: f64, at: Time, half_life: Time) {
        self.advance(at, half_life);
        if at < self.at {
            self.value += delta * integral(self.at - at, half_life);
        }
        self.rate += delta;
        if self.rate.abs() < 1e-9 {
            self.rate = 0.0;
        }
    }

    /// Books `gpu_seconds` spread evenly over `[from, to)`.
    pub(crate) fn add_spread(&mut self, from: Time, to: Time, gpu_seconds: f64, half_life: Time) {
        self.advance(to.max(from), half_life);
        let at = self.at;
        if to <= from {
            self.value += gpu_seconds * decay(at - from, half_life);
            return;
        }
        let per_second = gpu_seconds / (to - from) as f64;
        // Worth at `to`, then decayed to the reference moment.
        self.value += per_second * integral(to - from, half_life) * decay(at - to, half_life);
    }

    /// Decayed GPU-seconds at `now` (not before the latest change).
    pub(crate) fn at(&self, now: Time, half_life: Time) -> f64 {
        if self.at == Time::MIN || now <= self.at {
            return self.value.max(0.0);
        }
        let d = now - self.at;
        (self.value * decay(d, half_life) + self.rate * integral(d, half_life)).max(0.0)
    }
}

/// What a GPU-second is worth `d` seconds later.
fn decay(d: Time, half_life: Time) -> f64 {
    (-(d as f64) * std::f64::consts::LN_2 / half_life as f64).exp()
}

/// What one GPU-second per second over the last `d` seconds is worth now.
fn integral(d: Time, half_life: Time) -> f64 {
    let k = std::f64::consts::LN_2 / half_life as f64;
    -(-(d as f64) * k).exp_m1() / k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DAY, HOUR};

    const H: Time = 7 * DAY;

    #[test]
    fn a_charge_is_worth_half_as_much_one_half_life_later() {
        let mut d = Decayed::new();
        d.add_spread(0, 1, 100.0, H);
        let later = d.at(H + 1, H);
        assert!((later - 50.0).abs() < 1e-2, "{later}");
    }

    #[test]
    fn an_open_rate_matches_the_same_time_booked_hour_by_hour() {
        let mut by_rate = Decayed::new();
        by_rate.change_rate(4.0, 0, H);
        by_rate.change_rate(-4.0, 10 * HOUR, H);
        let mut by_hours = Decayed::new();
        for h in 0..10 {
            by_hours.add_spread(h * HOUR, (h + 1) * HOUR, 4.0 * HOUR as f64, H);
        }
        let now = 3 * DAY;
        let (a, b) = (by_rate.at(now, H), by_hours.at(now, H));
        assert!((a - b).abs() < 1e-6 * a, "{a} vs {b}");
        // And less than what was charged, since it has decayed.
        assert!(a < 40.0 * HOUR as f64 && a > 30.0 * HOUR as f64);
    }

    #[test]
    fn a_stop_dated_in_the_past_takes_the_time_back() {
        let mut d = Decayed::new();
        d.change_rate(2.0, 0, H);
        d.change_rate(1.0, 1_000, H);
        d.change_rate(-2.0, 500, H);
        d.change_rate(-1.0, 1_000, H);
        let mut e = Decayed::new();
        e.change_rate(2.0, 0, H);
        e.change_rate(-2.0, 500, H);
        let (a, b) = (d.at(2_000, H), e.at(2_000, H));
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}
