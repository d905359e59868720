//! A throttle on failed sign-ins, per account and per client address, so passwords cannot be
//! guessed at speed. Kept in memory: a restart forgets it, which only helps a guesser once.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Failures counted over this many seconds.
pub const WINDOW_S: i64 = 15 * 60;
/// Failed sign-ins to one account within the window before it is locked.
pub const PER_ACCOUNT: usize = 5;
/// Failed sign-ins from one address within the window before it is refused.
pub const PER_ADDRESS: usize = 20;

#[derive(Clone, Default)]
pub struct SignInThrottle {
    inner: Arc<Mutex<Failures>>,
}

#[derive(Default)]
struct Failures {
    accounts: HashMap<String, VecDeque<i64>>,
    addresses: HashMap<IpAddr, VecDeque<i64>>,
}

fn prune(times: &mut VecDeque<i64>, now: i64) {
    while times.front().is_some_and(|t| *t <= now - WINDOW_S) {
        times.pop_front();
    }
}

impl SignInThrottle {
    /// Seconds until `username` from `address` may try again; `None` when it may try now.
    pub fn wait(&self, username: &str, address: Option<IpAddr>, now: i64) -> Option<i64> {
        let mut f = self.inner.lock().expect("throttle lock");
        let key = username.trim().to_lowercase();
        let mut wait = None;
        if let Some(times) = f.accounts.get_mut(&key) {
            prune(times, now);
            if times.len() >= PER_ACCOUNT {
                wait = times.front().map(|t| t + WINDOW_S - now);
            }
        }
        if let Some(times) = address.and_then(|a| f.addresses.get_mut(&a)) {
            prune(times, now);
            if times.len() >= PER_ADDRESS {
                let w = times.front().map(|t| t + WINDOW_S - now);
                wait = wait.max(w);
            }
        }
        wait
    }

    pub fn failed(&self, username: &str, address: Option<IpAddr>, now: i64) {
        let mut f = self.inner.lock().expect("throttle lock");
        let key = username.trim().to_lowercase();
        f.accounts.entry(key).or_default().push_back(now);
        if let Some(a) = address {
            f.addresses.entry(a).or_default().push_back(now);
        }
        // Keep memory bounded under a spray of made-up usernames.
        let live = |t: &mut VecDeque<i64>| t.back().is_some_and(|t| *t > now - WINDOW_S);
        if f.accounts.len() > 100_000 {
            f.accounts.retain(|_, t| live(t));
        }
        if f.addresses.len() > 100_000 {
            f.addresses.retain(|_, t| live(t));
        }
    }

    pub fn succeeded(&self, username: &str) {
        let mut f = self.inner.lock().expect("throttle lock");
        f.accounts.remove(&username.trim().to_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_locks_after_five_failures_and_opens_when_they_age_out() {
        let t = SignInThrottle::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for k in 0..PER_ACCOUNT as i64 {
            assert_eq!(t.wait("Ada", Some(ip), 100 + k), None);
            t.failed("Ada", Some(ip), 100 + k);
        }
        assert_eq!(t.wait("ada", None, 200), Some(100 + WINDOW_S - 200));
        assert_eq!(
            t.wait("bob", Some(ip), 200),
            None,
            "other accounts are not locked"
        );
        assert_eq!(t.wait("ada", None, 100 + WINDOW_S + 1), None);
    }

    #[test]
    fn an_address_is_refused_after_twenty_failures_across_accounts() {
        let t = SignInThrottle::default();
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        for k in 0..PER_ADDRESS {
            t.failed(&format!("user{k}"), Some(ip), 1_000);
        }
        assert!(t.wait("someone-else", Some(ip), 1_001).is_some());
        assert_eq!(t.wait("someone-else", None, 1_001), None);
    }
}
