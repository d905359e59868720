//! The scheduler's settings page: DTOs and server functions (admin only to change).

pub mod api;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsView {
    pub window_days: f64,
    pub max_min_runtime_hours: f64,
    pub damping_margin: f64,
    pub heartbeat_deadline_s: i64,
    pub grace_s: i64,
    pub auto_recover_nodes: bool,
    /// Days a finished workload keeps its output, then its events (preemptions stay).
    pub output_retention_days: u32,
    pub event_retention_days: u32,
    pub history: Vec<SettingChange>,
    pub can_edit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingChange {
    pub at: i64,
    pub by: String,
    pub key: String,
    pub old_value: String,
    pub new_value: String,
}

/// The Settings form as typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsForm {
    pub window_days: String,
    pub max_min_runtime_hours: String,
    pub damping_margin: String,
    pub heartbeat_deadline_s: String,
    pub grace_s: String,
    /// Retention fields; a client that leaves them out keeps the current values.
    pub output_retention_days: Option<String>,
    pub event_retention_days: Option<String>,
    /// The checkbox: a node its agent reported unhealthy returns to service by itself.
    pub auto_recover_nodes: bool,
}
