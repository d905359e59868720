//! The one place the server reads the time of day. Services take a [`Clock`] (through the
//! runtime or the application state) instead of asking the system, so tests can run them at a
//! fixed moment and move it — the engine's own rule (time is a value), applied to the server.

use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};
use std::time::{SystemTime, UNIX_EPOCH};

/// The system clock in production; a settable one in tests. Cheap to clone (clones share it).
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Milliseconds since the epoch when fixed; `None` follows the system.
    fixed_ms: Option<Arc<AtomicI64>>,
}

impl Clock {
    pub fn system() -> Clock {
        Clock { fixed_ms: None }
    }

    /// A clock that stands at `at` (epoch seconds) until set or advanced.
    pub fn fixed(at: i64) -> Clock {
        Clock {
            fixed_ms: Some(Arc::new(AtomicI64::new(at * 1000))),
        }
    }

    /// Epoch seconds.
    pub fn now(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// Epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        match &self.fixed_ms {
            Some(ms) => ms.load(Ordering::Relaxed),
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        }
    }

    /// Nanoseconds of the system clock, as a seed: never fixed.
    pub fn entropy() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }

    /// Moves a fixed clock to `at` (epoch seconds).
    ///
    /// # Panics
    /// On the system clock, which nobody sets.
    pub fn set(&self, at: i64) {
        self.fixed_ms
            .as_ref()
            .expect("only a fixed clock is set")
            .store(at * 1000, Ordering::Relaxed);
    }

    /// Moves a fixed clock on by `seconds`.
    pub fn advance(&self, seconds: i64) {
        self.fixed_ms
            .as_ref()
            .expect("only a fixed clock is advanced")
            .fetch_add(seconds * 1000, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn a_fixed_clock_stands_still_until_moved_and_clones_share_it() {
        let clock = Clock::fixed(1_000);
        let seen_elsewhere = clock.clone();
        assert_eq!(clock.now(), 1_000);
        clock.advance(30);
        assert_eq!(seen_elsewhere.now(), 1_030);
        seen_elsewhere.set(5);
        assert_eq!(clock.now_ms(), 5_000);
    }

    #[test]
    fn the_system_clock_is_after_this_code_was_written() {
        assert!(Clock::system().now() > 1_790_000_000);
    }
}
