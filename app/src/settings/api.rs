//! Server functions of the Settings page.
// The update takes one argument per form field, and the `server` macro's client half repeats
// them in code an item-level allow does not reach.
#![allow(clippy::too_many_arguments)]

use super::SettingsView;
use crate::error::AppError;
use leptos::prelude::*;

/// Whether this database is the demo's (`serve --demo`): every page says so.
#[server(prefix = "/api", endpoint = "settings/demo")]
pub async fn demo_mode() -> Result<bool, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.demo_mode().await }.await)
}

#[server(prefix = "/api", endpoint = "settings/get")]
pub async fn get_settings() -> Result<SettingsView, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.settings(&require_user()?).await }.await)
}

// One argument per field of the Settings form (the browser posts them as form fields).
#[server(prefix = "/api", endpoint = "settings/update")]
pub async fn update_settings(
    window_days: String,
    max_min_runtime_hours: String,
    damping_margin: String,
    #[server(default)] kill_margin: Option<String>,
    heartbeat_deadline_s: String,
    grace_s: String,
    #[server(default)] auto_recover_nodes: Option<String>,
    #[server(default)] output_retention_days: Option<String>,
    #[server(default)] event_retention_days: Option<String>,
    #[server(default)] fiscal_start_month: Option<String>,
    #[server(default)] fast_lane: Option<String>,
    #[server(default)] fast_lane_peak: Option<String>,
    #[server(default)] fast_lane_window_minutes: Option<String>,
    #[server(default)] headroom_fraction: Option<String>,
    #[server(default)] reason: Option<String>,
) -> Result<SettingsView, AppError> {
    use crate::{backend::*, settings::SettingsForm};
    let form = SettingsForm {
        window_days,
        max_min_runtime_hours,
        damping_margin,
        kill_margin,
        heartbeat_deadline_s,
        grace_s,
        auto_recover_nodes: auto_recover_nodes.is_some(),
        output_retention_days,
        event_retention_days,
        fiscal_start_month,
        fast_lane,
        fast_lane_peak,
        fast_lane_window_minutes,
        headroom_fraction,
        reason,
    };
    with_status(async { backend()?.update_settings(&require_user()?, form).await }.await)
}
