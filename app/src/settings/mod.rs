//! The scheduler's settings page: DTOs and server functions (admin only to change).

pub mod api;
pub mod webhook;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsView {
    pub window_days: f64,
    pub max_min_runtime_hours: f64,
    pub damping_margin: f64,
    /// The wider margin for preempting work that cannot resume (its progress is lost).
    pub kill_margin: f64,
    pub heartbeat_deadline_s: i64,
    pub grace_s: i64,
    pub auto_recover_nodes: bool,
    /// Days a finished workload keeps its output, then its events (preemptions stay).
    pub output_retention_days: u32,
    pub event_retention_days: u32,
    /// The month the fiscal year starts in (1 = January): the Reports page's quarters.
    #[serde(default = "crate::calendar::january")]
    pub fiscal_start_month: u32,
    /// The fast lane (DESIGN §4.11): the share of the schedulable GPUs debug work may hold
    /// through it, the most it may hold at once while under that share on average, and the
    /// window that average is over.
    pub fast_lane: f64,
    pub fast_lane_peak: f64,
    pub fast_lane_window_minutes: f64,
    /// The headroom: the fraction of the schedulable GPUs other allocated work leaves for debug
    /// work to start on at once.
    pub headroom_fraction: f64,
    pub history: Vec<SettingChange>,
    pub can_edit: bool,
}

/// One change in the settings' history, in the form's words and units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingChange {
    pub at: i64,
    pub by: String,
    /// The stored key (`window_s`), for API clients.
    pub key: String,
    /// The form's label for it ("Lookback window (days)").
    pub label: String,
    /// Before and after in the form's units ("7", "14").
    pub old_value: String,
    pub new_value: String,
    /// Why, as the admin typed it.
    pub reason: Option<String>,
}

/// A stored setting's label and value as the Settings form shows them: seconds of the lookback
/// window become days, the cap's seconds hours, booleans "on"/"off". Unknown keys pass through.
pub fn in_form_units(key: &str, stored: &str) -> (&'static str, String) {
    let scaled = |per: f64| {
        stored
            .parse::<f64>()
            .map(|v| {
                let v = (v / per * 1000.0).round() / 1000.0;
                format!("{v}")
            })
            .unwrap_or_else(|_| stored.to_string())
    };
    match key {
        "window_s" => ("Lookback window (days)", scaled(86_400.0)),
        "max_min_runtime_s" => ("Minimum-runtime cap (hours)", scaled(3_600.0)),
        "damping_margin" => ("Damping margin", stored.to_string()),
        "kill_margin" => ("Kill margin (work that cannot resume)", stored.to_string()),
        "heartbeat_deadline_s" => ("Heartbeat deadline (seconds)", stored.to_string()),
        "grace_s" => ("Preemption grace period (seconds)", stored.to_string()),
        "output_retention_days" => ("Keep output for (days)", stored.to_string()),
        "event_retention_days" => ("Keep timelines for (days)", stored.to_string()),
        "fiscal_start_month" => ("Fiscal year starts in (month)", stored.to_string()),
        "webhook_url" => ("Webhook URL", stored.to_string()),
        "fast_lane" => ("Fast lane share", stored.to_string()),
        "fast_lane_peak" => ("Fast lane peak", stored.to_string()),
        "fast_lane_window_s" => ("Fast lane window (minutes)", scaled(60.0)),
        "headroom_fraction" => ("Headroom for debug work", stored.to_string()),
        "auto_recover_nodes" => (
            "Return recovered nodes to service",
            match stored {
                "true" => "on".to_string(),
                "false" => "off".to_string(),
                other => other.to_string(),
            },
        ),
        _ => ("", stored.to_string()),
    }
}

/// The Settings form as typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsForm {
    pub window_days: String,
    pub max_min_runtime_hours: String,
    pub damping_margin: String,
    /// A client that leaves it out keeps the current value.
    #[serde(default)]
    pub kill_margin: Option<String>,
    pub heartbeat_deadline_s: String,
    pub grace_s: String,
    /// Retention fields; a client that leaves them out keeps the current values.
    pub output_retention_days: Option<String>,
    pub event_retention_days: Option<String>,
    /// 1–12; a client that leaves it out keeps the current value.
    #[serde(default)]
    pub fiscal_start_month: Option<String>,
    /// The fast lane and the headroom; a client that leaves one out keeps its current value.
    #[serde(default)]
    pub fast_lane: Option<String>,
    #[serde(default)]
    pub fast_lane_peak: Option<String>,
    #[serde(default)]
    pub fast_lane_window_minutes: Option<String>,
    #[serde(default)]
    pub headroom_fraction: Option<String>,
    /// The checkbox: a node its agent reported unhealthy returns to service by itself.
    pub auto_recover_nodes: bool,
    /// Why, recorded with each change (optional).
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::in_form_units;

    #[test]
    fn the_history_shows_stored_seconds_in_the_forms_days_and_hours() {
        assert_eq!(
            in_form_units("window_s", "604800"),
            ("Lookback window (days)", "7".into())
        );
        assert_eq!(
            in_form_units("window_s", "21600"),
            ("Lookback window (days)", "0.25".into())
        );
        assert_eq!(
            in_form_units("max_min_runtime_s", "28800"),
            ("Minimum-runtime cap (hours)", "8".into())
        );
        assert_eq!(in_form_units("auto_recover_nodes", "false").1, "off");
        assert_eq!(
            in_form_units("fast_lane_window_s", "5400"),
            ("Fast lane window (minutes)", "90".into())
        );
        assert_eq!(
            in_form_units("grace_s", "30"),
            ("Preemption grace period (seconds)", "30".into())
        );
    }
}
