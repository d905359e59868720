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
    /// The verdict for requests of `gpus` at `key`, at pool version and failure count `at`;
    /// `work_out` gives it with the first reservation holder after `key` that it depends on.
    pub(crate) fn get(
        &mut self,
        at: (u64, u64),
        key: QueueKey,
        gpus: u32,
        work_out: impl FnOnce() -> (Verdict, Option<QueueKey>),
    ) -> Verdict {
        if self.at != Some(at) || self.until.is_some_and(|until| key >= until) {
            self.at = Some(at);
            self.until = None;
            self.by_size.clear();
        }
        if let Some(&(_, verdict)) = self.by_size.iter().find(|(size, _)| *size == gpus) {
            return verdict;
        }
        let (verdict, until) = work_out();
        if let Some(until) = until {
            self.until = Some(self.until.map_or(until, |u| u.min(until)));
        }
        self.by_size.push((gpus, verdict));
        verdict
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
}
