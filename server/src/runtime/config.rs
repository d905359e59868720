//! The scheduler runtime's knobs (the Settings page will edit them live).

use scheduler::{Time, DAY, HOUR};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeConfig {
    /// The fair-share lookback window.
    pub window: Time,
    /// The largest minimum runtime a workload may ask for.
    pub max_min_runtime: Time,
    /// See `scheduler::Config::damping_margin`.
    pub damping_margin: f64,
    /// See `scheduler::Config::kill_margin`: never below the damping margin.
    pub kill_margin: f64,
    /// A node whose agent is silent this long is marked down.
    pub heartbeat_deadline: Time,
    /// Seconds between SIGTERM and SIGKILL when an agent stops a workload.
    pub grace: Time,
    /// The runtime decides at least this often, even without events (milliseconds).
    pub safety_tick_ms: u64,
    /// A node its agent reported unhealthy returns to service when the agent reports healthy
    /// again; otherwise an admin returns it (uncordon).
    pub auto_recover_nodes: bool,
    /// How long finished workloads keep their output and events.
    pub retention: crate::workloads::retention::Retention,
    /// The month the organisation's fiscal year starts in (1 = January: calendar quarters).
    pub fiscal_start_month: u32,
}

impl RuntimeConfig {
    /// The organisation's fiscal calendar (a stored month outside 1–12 reads as January).
    pub fn fiscal(&self) -> app::calendar::Fiscal {
        app::calendar::Fiscal::starting(self.fiscal_start_month).unwrap_or_default()
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            window: 7 * DAY,
            max_min_runtime: 8 * HOUR,
            damping_margin: 0.02,
            kill_margin: scheduler::Config::default().kill_margin,
            heartbeat_deadline: 30,
            grace: 10,
            safety_tick_ms: 5_000,
            auto_recover_nodes: false,
            retention: Default::default(),
            fiscal_start_month: 1,
        }
    }
}

impl RuntimeConfig {
    pub fn engine_config(&self) -> scheduler::Config {
        let mut config = scheduler::Config::default();
        config.ledger.window = self.window;
        config.damping_margin = self.damping_margin;
        config.kill_margin = self.kill_margin;
        config
    }
}
