//! A throttle on failed sign-ins, per account and per client address, so passwords cannot be
//! guessed at speed. The failures live in the database, so every replica counts the same ones
//! and a restart forgets nothing; the client address is the one a trusted proxy reports (see
//! [`super::client`]), so one proxy's address does not lock sign-in for everyone behind it.

use super::repo;
use sqlx::AnyPool;
use std::net::IpAddr;

/// Failures counted over this many seconds.
pub const WINDOW_S: i64 = 15 * 60;
/// Failed sign-ins to one account within the window before it is locked.
pub const PER_ACCOUNT: i64 = 5;
/// Failed sign-ins from one address within the window before it is refused.
pub const PER_ADDRESS: i64 = 20;

/// Failures within the window: how many, and the oldest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recent {
    pub count: i64,
    pub oldest: Option<i64>,
}

/// Seconds until a sign-in may be tried again, from the failures of its account and address;
/// `None` when it may be tried now. Pure.
pub fn wait(account: Recent, address: Recent, now: i64) -> Option<i64> {
    let until = |recent: Recent, limit: i64| {
        (recent.count >= limit)
            .then_some(recent.oldest)
            .flatten()
            .map(|t| t + WINDOW_S - now)
    };
    until(account, PER_ACCOUNT).max(until(address, PER_ADDRESS))
}

fn account_key(username: &str) -> String {
    username.trim().to_lowercase()
}

async fn recent(pool: &AnyPool, column: &str, key: &str, now: i64) -> Result<Recent, sqlx::Error> {
    let (count, oldest) = repo::failures_since(pool, column, key, now - WINDOW_S).await?;
    Ok(Recent { count, oldest })
}

/// Seconds until `username` from `address` may try again; `None` when it may try now.
pub async fn wait_for(
    pool: &AnyPool,
    username: &str,
    address: Option<IpAddr>,
    now: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let account = recent(pool, "account", &account_key(username), now).await?;
    let address = match address {
        Some(a) => recent(pool, "address", &a.to_string(), now).await?,
        None => Recent::default(),
    };
    Ok(wait(account, address, now))
}

pub async fn failed(
    pool: &AnyPool,
    username: &str,
    address: Option<IpAddr>,
    now: i64,
) -> Result<(), sqlx::Error> {
    let address = address.map(|a| a.to_string());
    repo::insert_failure(pool, &account_key(username), address.as_deref(), now).await?;
    // Keeps the table to one window's failures, however many made-up usernames are sprayed.
    repo::forget_failures_until(pool, now - WINDOW_S).await?;
    Ok(())
}

pub async fn succeeded(pool: &AnyPool, username: &str) -> Result<(), sqlx::Error> {
    repo::forget_account(pool, &account_key(username)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recent(count: i64, oldest: i64) -> Recent {
        Recent {
            count,
            oldest: Some(oldest),
        }
    }

    #[test]
    fn an_account_locks_after_five_failures_until_the_oldest_ages_out() {
        assert_eq!(wait(recent(4, 100), Recent::default(), 200), None);
        assert_eq!(
            wait(recent(5, 100), Recent::default(), 200),
            Some(100 + WINDOW_S - 200)
        );
    }

    #[test]
    fn an_address_is_refused_after_twenty_failures_and_the_longer_wait_wins() {
        assert_eq!(wait(Recent::default(), recent(19, 10), 20), None);
        assert_eq!(
            wait(recent(5, 50), recent(20, 10), 60),
            Some(50 + WINDOW_S - 60)
        );
    }
}
