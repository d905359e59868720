//! The decision loop (see [`Runtime::spawn`]).

use super::{lease, Runtime, SLOW_PASS};
use std::time::Duration;

/// After a pass that took `d`, wake-ups wait until `REST_PER_PASS × d` more has passed (at most
/// [`MAX_REST`]), and whatever woke the scheduler in that time is decided on by one pass. So the
/// loop decides at most a third of the time, whatever the rate of submissions and ended runs;
/// SLURM's `SchedulerParameters=sched_min_interval` is the same idea, as a fixed interval. A pass
/// of a few milliseconds (a small cluster) rests as little; at 50,000 queued on two cores, with
/// a submission every 20 ms, passes ran back to back and took half the server's CPU.
const REST_PER_PASS: u32 = 2;
/// The longest rest: a debug workload that fits waits at most this long for the pass that starts
/// it, beyond the pass under way.
const MAX_REST: Duration = Duration::from_millis(200);

/// How long wake-ups wait after a pass that took `took`.
fn rest_after(took: Duration) -> Duration {
    (took * REST_PER_PASS).min(MAX_REST)
}

/// The running decision loop (see [`Runtime::spawn`]). Dropping it leaves the loop running.
pub struct Scheduler {
    task: tokio::task::JoinHandle<()>,
}

impl Scheduler {
    /// Stops deciding and returns once the loop has ended: a pass under way ends at its next
    /// await, its transaction rolled back, so nothing it decided is half written, and no pass
    /// begins after this returns (the lease can then be given up).
    pub async fn stop(self) {
        self.task.abort();
        // Cancelled is how it ends; a panic in the loop was logged where it happened.
        let _ = self.task.await;
    }
}

impl Runtime {
    /// Starts the decision loop (see [`Runtime::decide_forever`]) and the retention loop.
    ///
    /// The loop shares the server's workers with the requests. Tried (README, "Tried and not
    /// kept"): on a thread of its own with a single-threaded Tokio runtime, at 50,000 queued on
    /// SQLite its pass p50 fell from 153 to 109 ms and agent sync p99 from 1.9 to 0.8 s; on
    /// PostgreSQL both got worse (sync p99 2.3 s), since a connection is served by the I/O driver
    /// of the runtime that opened it,
    /// and requests then waited on connections the busy decision thread had opened (and failed on
    /// them once it stopped). With a pool of its own opened on that thread, the pass at 50,000
    /// queued fell to 94 / 470 ms while agent sync p99 rose to 4.2 s and pages' p50 tenfold: on
    /// two saturated cores the thread only moves the wait from the pass to everyone else.
    pub fn spawn(&self) -> Scheduler {
        tokio::spawn(self.clone().keep_history());
        Scheduler {
            task: tokio::spawn(self.clone().decide_forever()),
        }
    }

    /// The decision loop. The leader passes on every wake-up, at the engine's next event and at
    /// least every safety tick, and renews the lease in between every [`lease::RENEW_MS`] with
    /// one small write; a follower tries to claim the lease as often. Both watch the replicas'
    /// counters four times a second: the leader for wake-ups forwarded by followers, followers
    /// for changed assignments (to answer their agents' long polls).
    async fn decide_forever(self) {
        let runtime = self;
        let (mut seen_wake, mut seen_assign, mut seen_settings) = (0, 0, 0);
        let renew_every = Duration::from_millis(lease::RENEW_MS);
        loop {
            let began = std::time::Instant::now();
            let passed = runtime.pass(runtime.now()).await;
            if let Ok(outcome) = &passed {
                if runtime.is_leader() {
                    runtime.record_pass(outcome.timing);
                }
            }
            if began.elapsed() > SLOW_PASS {
                // On SQLite the pass holds the only write lock while it prepares and applies:
                // heartbeats and submissions wait behind those phases.
                let timing = passed.as_ref().map(|o| o.timing).unwrap_or_default();
                tracing::warn!(
                    took = ?began.elapsed(),
                    lock = ?timing.lock,
                    prepare = ?timing.prepare,
                    load = ?timing.load,
                    decide = ?timing.decide,
                    apply = ?timing.apply,
                    commit = ?timing.commit,
                    "slow scheduler pass"
                );
            }
            // Wake-ups during the rest are kept (a stored permit) and answered right after it.
            let rest = rest_after(began.elapsed());
            let next = match passed {
                Ok(outcome) => outcome.next_wake,
                Err(error) => {
                    tracing::error!(%error, "scheduler pass failed");
                    None
                }
            };
            let mut claimed = tokio::time::Instant::now();
            let tick = if runtime.is_leader() {
                Duration::from_millis(runtime.config().safety_tick_ms)
            } else {
                renew_every
            };
            let until_next = next
                .map(|t| Duration::from_secs((t - runtime.now()).max(0) as u64).min(tick))
                .unwrap_or(tick);
            let deadline = claimed + until_next;
            if runtime.is_leader() && !rest.is_zero() {
                tokio::time::sleep(rest.min(until_next)).await;
            }
            loop {
                let slice = deadline
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(Duration::from_millis(250));
                tokio::select! {
                    // A follower's own wake-ups are forwarded by `wake`; only the leader passes.
                    _ = runtime.inner.wake.notified() => if runtime.is_leader() { break },
                    _ = tokio::time::sleep(slice) => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                if runtime.is_leader() && claimed.elapsed() >= renew_every {
                    claimed = tokio::time::Instant::now();
                    if !matches!(runtime.renew().await, Ok(true)) {
                        break;
                    }
                }
                let Ok(lease::Counters {
                    wake_seq: wake,
                    assign_seq: assign,
                    settings_seq: settings,
                }) = lease::counters(&runtime.inner.pool).await
                else {
                    continue;
                };
                if settings != seen_settings {
                    // Settings changed on some replica: decide and serve with them from now on.
                    match crate::settings::load(&runtime.inner.pool, runtime.config()).await {
                        Ok(config) => {
                            seen_settings = settings;
                            if config != runtime.config() {
                                tracing::info!("settings changed on another replica; applied");
                                runtime.set_config(config);
                            }
                        }
                        Err(error) => tracing::warn!(%error, "could not reload settings"),
                    }
                }
                // The leader announced its own changes when it made them.
                if assign != seen_assign {
                    seen_assign = assign;
                    if !runtime.is_leader() {
                        runtime.announce_all_nodes();
                    }
                }
                if wake != seen_wake {
                    seen_wake = wake;
                    if runtime.is_leader() {
                        // Forwarded by another replica, which changed what it cannot name here:
                        // workloads, or the tree and the nodes.
                        runtime.workloads_changed_unknown();
                        runtime.inner.queue.reshape();
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_rests_twice_as_long_as_its_pass_took_and_never_more_than_the_most_it_may() {
        assert_eq!(rest_after(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            rest_after(Duration::from_millis(3)),
            Duration::from_millis(6)
        );
        assert_eq!(
            rest_after(Duration::from_millis(40)),
            Duration::from_millis(80)
        );
        assert_eq!(rest_after(Duration::from_millis(150)), MAX_REST);
        assert_eq!(rest_after(Duration::from_secs(5)), MAX_REST);
    }
}
