//! CPU-heavy work that no request waits on (the start projection of a large queue), run on a
//! thread of its own at the lowest scheduling priority, so that on a saturated machine it takes
//! the CPU only when the requests, the agents' syncs and the scheduler's passes leave it idle.
//!
//! Measured with `hourglass loadtest` at 50,000 queued on this 2-core machine: the first
//! projection took 13 s of a core, and every slow request of the minute (agent syncs, pages,
//! submissions over 0.8 s) fell within those 13 s.

use crate::ServerError;

/// Runs `work` on a new thread named `name` at the lowest priority and waits for its result.
pub async fn run_low<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ServerError> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lowest_priority();
            // The waiter may have gone (its request ended): the result is dropped.
            let _ = done.send(work());
        })
        .map_err(|e| ServerError::Config(format!("could not start {name}: {e}")))?;
    result
        .await
        .map_err(|_| ServerError::Config(format!("{name} stopped before it finished")))
}

/// Lowers the calling thread's priority to the least (nice 19). On Linux the nice value belongs
/// to each thread, so the rest of the process keeps its own. Elsewhere the work runs at the
/// process's priority.
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: setpriority reads only its three integer arguments; gettid cannot fail.
        let changed =
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
        if changed != 0 {
            tracing::debug!("could not lower a background thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_work_runs_at_the_lowest_priority_and_returns_its_result() {
        let nice = run_low("test-background", || {
            // SAFETY: as above; getpriority only reads its integer arguments.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        })
        .await
        .unwrap();
        assert_eq!(nice, 19);
        // SAFETY: as above.
        let here = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        assert!(here < 19, "the caller's own priority is left as it was");
    }
}
