//! What the load test measures: latency samples, errors, the report.

use serde::Serialize;
use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Mutex,
};
use std::time::Duration;

/// Latencies of one kind, recorded only while the measured window is open.
#[derive(Default)]
pub struct Samples(Mutex<Vec<Duration>>);

impl Samples {
    pub fn push(&self, took: Duration) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(took);
    }

    pub fn summary(&self) -> Summary {
        self.summary_with(Vec::new())
    }

    /// The summary of these samples and `more`.
    pub fn summary_with(&self, mut more: Vec<Duration>) -> Summary {
        more.extend(self.0.lock().unwrap_or_else(|p| p.into_inner()).iter());
        Summary::of(more)
    }

    /// The summary of several kinds together.
    pub fn merged(kinds: &[&Samples]) -> Summary {
        let mut all = Vec::new();
        for kind in kinds {
            all.extend(kind.0.lock().unwrap_or_else(|p| p.into_inner()).iter());
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

/// Whether the measured window is open (latencies before it, while the queue is seeded, are not
/// counted; errors always are).
#[derive(Default)]
pub struct Window(AtomicBool);

impl Window {
    pub fn open(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn close(&self) {
        self.0.store(false, Ordering::Release);
    }

    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::Acquire)
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
