//! What the load test measures: latency samples, errors, the report.

use serde::Serialize;
use std::sync::{
    atomic::{AtomicU64, AtomicU8, Ordering},
    Mutex,
};
use std::time::Duration;

/// Latencies of one kind: those of the measured window, and those of the warm-up before it.
#[derive(Default)]
pub struct Samples {
    window: Mutex<Vec<Duration>>,
    warmup: Mutex<Vec<Duration>>,
}

impl Samples {
    /// Records `took` in the phase it was measured in (nothing while the queue is seeded).
    pub fn push(&self, phase: Phase, took: Duration) {
        let kept = match phase {
            Phase::Seeding => return,
            Phase::Warmup => &self.warmup,
            Phase::Open => &self.window,
        };
        kept.lock().unwrap_or_else(|p| p.into_inner()).push(took);
    }

    pub fn summary(&self) -> Summary {
        self.summary_with(Vec::new())
    }

    /// The summary of these samples and `more`.
    pub fn summary_with(&self, mut more: Vec<Duration>) -> Summary {
        more.extend(self.window.lock().unwrap_or_else(|p| p.into_inner()).iter());
        Summary::of(more)
    }

    /// The summary of several kinds together, in the window or in the warm-up.
    pub fn merged(kinds: &[&Samples], phase: Phase) -> Summary {
        let mut all = Vec::new();
        for kind in kinds {
            let kept = match phase {
                Phase::Warmup => &kind.warmup,
                _ => &kind.window,
            };
            all.extend(kept.lock().unwrap_or_else(|p| p.into_inner()).iter());
        }
        Summary::of(all)
    }
}

/// Count and quantiles of a set of latencies, in milliseconds (all zero when empty).
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub fn of(mut latencies: Vec<Duration>) -> Summary {
        if latencies.is_empty() {
            return Summary::default();
        }
        latencies.sort();
        let pick = |p: f64| {
            let n = latencies.len();
            let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            round(latencies[i].as_secs_f64() * 1e3)
        };
        Summary {
            count: latencies.len(),
            p50_ms: pick(0.50),
            p99_ms: pick(0.99),
            max_ms: pick(1.0),
        }
    }
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

/// Requests that failed (a transport error or an unexpected status), with the first few said.
#[derive(Default)]
pub struct Errors {
    count: AtomicU64,
    first: Mutex<Vec<String>>,
}

impl Errors {
    pub fn record(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.len() < 10 {
            first.push(what);
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn first(&self) -> Vec<String> {
        self.first.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Where the run is: seeding the queue (nothing measured), warming up (readers and submitters
/// running, measured apart), in the measured window, or past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Seeding,
    Warmup,
    Open,
}

/// The run's [`Phase`], shared by every task; errors count in every phase.
#[derive(Default)]
pub struct Window(AtomicU8);

impl Window {
    pub fn warm_up(&self) {
        self.0.store(1, Ordering::Release);
    }

    pub fn open(&self) {
        self.0.store(2, Ordering::Release);
    }

    pub fn close(&self) {
        self.0.store(0, Ordering::Release);
    }

    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            1 => Phase::Warmup,
            2 => Phase::Open,
            _ => Phase::Seeding,
        }
    }

    pub fn is_open(&self) -> bool {
        self.phase() == Phase::Open
    }
}

/// The last line the load test prints.
#[derive(Debug, Serialize)]
pub struct Report {
    pub pass_p50_ms: f64,
    pub pass_p99_ms: f64,
    /// Phases of the pass (see `runtime::PassTiming`): waiting for the write lock, loading the
    /// snapshot, deciding, writing the decision.
    pub pass_lock_p99_ms: f64,
    pub pass_load_p99_ms: f64,
    pub pass_decide_p99_ms: f64,
    pub pass_apply_p99_ms: f64,
    pub sync_p99_ms: f64,
    pub start_p99_ms: f64,
    pub page_p99_ms: f64,
    pub queue_page_p99_ms: f64,
    pub workload_page_p99_ms: f64,
    pub submit_p99_ms: f64,
    pub server_rss_mb: f64,
    /// Cores used on average in the window by the server and by the load generator.
    pub server_cpu_cores: f64,
    pub harness_cpu_cores: f64,
    pub errors: u64,
    pub passes: usize,
    pub syncs: usize,
    pub debug_started: usize,
    pub debug_not_started: usize,
    pub pages: usize,
    /// Snapshots built for pages on the leader's latest pass's base, and read whole.
    pub page_snapshots_on_base: u64,
    pub page_snapshots_read_whole: u64,
    pub submitted: usize,
    pub nodes: u32,
    pub gpus: u32,
    pub queued_at_end: i64,
    pub running_at_end: i64,
    pub database: &'static str,
    pub duration_s: u64,
}

/// The peak resident memory of this process in MiB (`VmHWM`), or 0 where /proc cannot tell.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| round(kb / 1024.0))
        .unwrap_or(0.0)
}

/// Name of the load generator's threads (agents, readers, submitters): the rest of the process
/// is the server.
pub const HARNESS_THREADS: &str = "loadtest";

/// CPU time used so far, in seconds: by the whole process (threads that ended included), and by
/// the load generator's threads ([`HARNESS_THREADS`]). Zeros where /proc cannot tell.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuUse {
    pub process_s: f64,
    pub harness_s: f64,
}

impl CpuUse {
    pub fn now() -> CpuUse {
        // SAFETY: sysconf only reads a constant of the system's configuration.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
        let seconds = |stat: &str| cpu_ticks(stat).unwrap_or(0) as f64 / ticks;
        let process_s = std::fs::read_to_string("/proc/self/stat")
            .map(|s| seconds(&s))
            .unwrap_or(0.0);
        let harness_s = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end().starts_with(HARNESS_THREADS))
            })
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
            .map(|stat| seconds(&stat))
            .sum();
        CpuUse {
            process_s,
            harness_s,
        }
    }

    /// Cores used on average from `earlier` to this, over `elapsed`: (server, load generator).
    pub fn cores_since(&self, earlier: &CpuUse, elapsed: Duration) -> (f64, f64) {
        let secs = elapsed.as_secs_f64().max(1e-3);
        let harness = (self.harness_s - earlier.harness_s) / secs;
        let process = (self.process_s - earlier.process_s) / secs;
        (round2(process - harness), round2(harness))
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// User plus system time, in clock ticks, from a `/proc/.../stat` line (fields 14 and 15; the
/// command name before them is in parentheses and may hold spaces).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (load (gen) 2) S 1 4242 4242 0 -1 4194560 100 0 0 0 731 269 0 0 20 0";
        assert_eq!(cpu_ticks(stat), Some(1_000));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn samples_are_kept_by_phase_and_none_while_seeding() {
        let samples = Samples::default();
        samples.push(Phase::Seeding, Duration::from_millis(900));
        samples.push(Phase::Warmup, Duration::from_millis(500));
        samples.push(Phase::Open, Duration::from_millis(20));
        samples.push(Phase::Open, Duration::from_millis(40));
        let window = samples.summary();
        assert_eq!((window.count, window.max_ms), (2, 40.0));
        let warmup = Samples::merged(&[&samples], Phase::Warmup);
        assert_eq!((warmup.count, warmup.max_ms), (1, 500.0));
    }

    #[test]
    fn this_process_has_used_some_cpu_and_its_share_is_split_by_thread_name() {
        let busy = std::thread::Builder::new()
            .name(format!("{HARNESS_THREADS}-test"))
            .spawn(|| {
                let began = std::time::Instant::now();
                let mut x = 0_u64;
                while began.elapsed() < Duration::from_millis(300) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                CpuUse::now()
            })
            .unwrap();
        let seen = busy.join().unwrap();
        assert!(seen.harness_s >= 0.1, "{seen:?}");
        assert!(seen.process_s >= seen.harness_s, "{seen:?}");
    }
}
