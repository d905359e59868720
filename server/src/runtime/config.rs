//! The scheduler runtime's knobs (the Settings page edits them live).

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
    /// The fast lane's share of the schedulable GPUs: see `scheduler::Config::fast_lane` (0 turns
    /// the lane off).
    pub fast_lane: f64,
    /// See `scheduler::Config::fast_lane_peak`: never below `fast_lane`.
    pub fast_lane_peak: f64,
    /// See `scheduler::Config::fast_lane_window`.
    pub fast_lane_window: Time,
    /// See `scheduler::Config::headroom_max_fraction` (0 turns the headroom off).
    pub headroom_fraction: f64,
    /// How far behind a pass lets the hours' allocated demand, and what is owed, fall before
    /// booking them, within an hour (see `ledger::accrue_in_pass`).
    pub demand_every_s: Time,
}

impl RuntimeConfig {
    /// The organisation's fiscal calendar (a stored month outside 1–12 reads as January).
    pub fn fiscal(&self) -> app::calendar::Fiscal {
        app::calendar::Fiscal::starting(self.fiscal_start_month).unwrap_or_default()
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        let engine = scheduler::Config::default();
        RuntimeConfig {
            window: 7 * DAY,
            max_min_runtime: 8 * HOUR,
            damping_margin: 0.02,
            kill_margin: engine.kill_margin,
            heartbeat_deadline: 30,
            grace: 10,
            safety_tick_ms: 5_000,
            auto_recover_nodes: false,
            retention: Default::default(),
            fiscal_start_month: 1,
            fast_lane: engine.fast_lane,
            fast_lane_peak: engine.fast_lane_peak,
            fast_lane_window: engine.fast_lane_window,
            headroom_fraction: engine.headroom_max_fraction,
            demand_every_s: 30,
        }
    }
}

impl RuntimeConfig {
    pub fn engine_config(&self) -> scheduler::Config {
        let mut config = scheduler::Config::default();
        config.ledger.window = self.window;
        config.damping_margin = self.damping_margin;
        config.kill_margin = self.kill_margin;
        config.fast_lane = self.fast_lane;
        config.fast_lane_peak = self.fast_lane_peak;
        config.fast_lane_window = self.fast_lane_window;
        config.headroom_max_fraction = self.headroom_fraction;
        config
    }
}
