//! Which of a group's single-host requests a failure on record rules out, worked out once per
//! request size instead of once per workload.
//!
//! A fair-share pass finds a single-host request hopeless, and leaves it waiting without a search,
//! when the newest failure on record that covers it (see `memo`) was recorded after the last host
//! got easier, and no reserved host is open to the request that was closed to that failure. For
//! requests of one size behind every such reservation's holder in the queue, all of that reads the
//! same but one thing: whether the request can resume with a minimum runtime that ends by a
//! reservation's time. So the pass works out a [`Verdict`] per size, pool version and failure on
//! record, and reads each waiting workload against it: a long queue of waiting work costs a
//! comparison per workload instead of a lookup in the memo and a walk of the reservations.

use crate::ids::Time;
use crate::queue::QueueKey;

/// What the failures on record say of single-host requests of one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A search may find something: no failure covers it, a host got easier since, or a
    /// reservation the failure could not use is open to it by its place in the queue.
    Search,
    /// Left waiting without a search, unless it can resume and its minimum runtime ends by
    /// `unless_by` (the latest time of a reservation the failure could not use).
    RuledOut { unless_by: Option<Time> },
}

impl Verdict {
    /// Whether a request of this size that can resume (or not) with this minimum runtime is left
    /// waiting without a search at `now`.
    pub(crate) fn rules_out(self, resumable: bool, min_runtime: Time, now: Time) -> bool {
        match self {
            Verdict::Search => false,
            Verdict::RuledOut { unless_by } => {
                !(resumable && unless_by.is_some_and(|by| now + min_runtime <= by))
            }
        }
    }
}

/// A group's verdicts by request size, for one pool version and count of failures on record.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    at: Option<(u64, u64)>,
    /// The first holder of a reservation later in the queue than the requests the verdicts were
    /// worked out for: requests ahead of it may use its hosts, those behind it may not, so the
    /// verdicts are worked out again from there.
    until: Option<QueueKey>,
    by_size: Vec<(u32, Verdict)>,
}

impl Verdicts {
    /// The verdict for requests of `gpus` at `key` (worked out only when needed), at pool version
    /// and failure count `at`; `work_out` gives it from the key with the first reservation holder
    /// after the key that it depends on.
    pub(crate) fn get(
        &mut self,
        at: (u64, u64),
        key: &impl Fn() -> QueueKey,
        gpus: u32,
        work_out: impl FnOnce(QueueKey) -> (Verdict, Option<QueueKey>),
    ) -> Verdict {
        if self.at != Some(at) || self.until.is_some_and(|until| key() >= until) {
            self.at = Some(at);
            self.until = None;
            self.by_size.clear();
        }
        if let Some(&(_, verdict)) = self.by_size.iter().find(|(size, _)| *size == gpus) {
            return verdict;
        }
        let (verdict, until) = work_out(key());
        if let Some(until) = until {
            self.until = Some(self.until.map_or(until, |u| u.min(until)));
        }
        self.by_size.push((gpus, verdict));
        verdict
    }
}

/// Which later requests have the same reserved hosts open to them as one held back by the headroom,
/// which could use those of a set `B`: requests behind every holder in the queue (so that none
/// may use a reservation by its place) that cannot resume when `B` is empty, or that can resume
/// with a minimum runtime ending by every reservation of `B` and after every other one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SameBackfill {
    /// The last holder in the queue, if any reservation is live.
    behind: Option<QueueKey>,
    empty: bool,
    /// For resumable work: the minimum runtime ends after the first and by the second.
    ends: Option<(Time, Time)>,
}

impl SameBackfill {
    /// From the live reservations: each holder's key, its time, and whether it is in `B`.
    pub(crate) fn of(live: impl Iterator<Item = (QueueKey, Time, bool)>) -> SameBackfill {
        let mut behind = None;
        let (mut after, mut by) = (Time::MIN, Time::MAX);
        let mut empty = true;
        for (key, at, open) in live {
            behind = behind.max(Some(key));
            if open {
                empty = false;
                by = by.min(at);
            } else {
                after = after.max(at);
            }
        }
        SameBackfill {
            behind,
            empty,
            ends: (after < by).then_some((after, by)),
        }
    }

    /// Whether a request at `key` (worked out only when needed) that can resume (or not) with
    /// `min_runtime` may use exactly the reservations of `B` at `now`.
    pub(crate) fn holds(
        self,
        key: &impl Fn() -> QueueKey,
        resumable: bool,
        min_runtime: Time,
        now: Time,
    ) -> bool {
        if self.behind.is_some_and(|last| key() < last) {
            return false;
        }
        if !resumable {
            return self.empty;
        }
        self.ends
            .is_some_and(|(after, by)| (after + 1..=by).contains(&(now + min_runtime)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_resumable_work_that_ends_by_a_reservation_escapes_a_verdict() {
        let verdict = Verdict::RuledOut {
            unless_by: Some(100),
        };
        assert!(!verdict.rules_out(true, 60, 40));
        assert!(verdict.rules_out(true, 61, 40));
        assert!(verdict.rules_out(false, 0, 40));
        let closed = Verdict::RuledOut { unless_by: None };
        assert!(closed.rules_out(true, 0, 40));
        assert!(!Verdict::Search.rules_out(false, 0, 40));
    }

    fn key(id: u64) -> QueueKey {
        QueueKey::fair_share(
            &crate::snapshot::WorkloadSpec {
                id: crate::ids::WorkloadId(id),
                leaf: crate::ids::BudgetId(0),
                gpus: 1,
                min_runtime: 0,
                resumable: true,
                priority: 0,
                submitted_at: 0,
                time_limit: None,
            },
            0,
        )
    }

    #[test]
    fn the_same_reservations_are_open_to_work_behind_their_holders_ending_in_the_same_span() {
        // Reservations at 100 (open to the held-back request) and 50 (closed to it).
        let same = SameBackfill::of([(key(1), 100, true), (key(2), 50, false)].into_iter());
        let now = 10;
        // Ends after 50 and by 100: exactly the first one is open to it.
        assert!(same.holds(&|| key(3), true, 41, now));
        assert!(same.holds(&|| key(3), true, 90, now));
        assert!(!same.holds(&|| key(3), true, 40, now));
        assert!(!same.holds(&|| key(3), true, 91, now));
        // Work that cannot resume may use neither; ahead of a holder, it may use that one.
        assert!(!same.holds(&|| key(3), false, 60, now));
        assert!(!same.holds(&|| key(0), true, 60, now));
    }

    #[test]
    fn work_that_cannot_resume_matches_a_request_no_reservation_was_open_to() {
        let closed = SameBackfill::of([(key(1), 100, false)].into_iter());
        assert!(closed.holds(&|| key(3), false, 0, 10));
        assert!(closed.holds(&|| key(3), true, 91, 10));
        assert!(!closed.holds(&|| key(3), true, 90, 10));
        // Open ones that no single minimum runtime could select together with a closed one.
        let none = SameBackfill::of([(key(1), 50, true), (key(2), 100, false)].into_iter());
        assert!((0..200).all(|min| !none.holds(&|| key(3), true, min, 10)));
        // No reservation: every request behind nothing has the same (none) open.
        let free = SameBackfill::of(std::iter::empty());
        assert!(free.holds(&|| key(0), false, 0, 10) && free.holds(&|| key(0), true, 5, 10));
    }
}
