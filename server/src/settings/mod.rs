//! Scheduler settings: stored overrides of the built-in defaults, validated, applied live to the
//! runtime, and audited.

pub mod repo;

use crate::{runtime::config::RuntimeConfig, runtime::Runtime, ServerError};
use app::{
    model::CurrentUser,
    settings::{in_form_units, SettingChange, SettingsForm, SettingsView},
};
use scheduler::{DAY, HOUR};
use sqlx::AnyPool;

/// Whether a node whose agent reports healthy again goes back into service by itself. Read from
/// the database where it is needed, so every replica follows a change at once.
pub async fn auto_recover_nodes(pool: &AnyPool) -> Result<bool, ServerError> {
    let value = repo::value(pool, "auto_recover_nodes").await?;
    Ok(value
        .and_then(|v| v.parse().ok())
        .unwrap_or(RuntimeConfig::default().auto_recover_nodes))
}

/// The defaults with every stored override applied.
pub async fn load(pool: &AnyPool, mut config: RuntimeConfig) -> Result<RuntimeConfig, ServerError> {
    let rows = repo::all(pool).await?;
    for (key, value) in rows {
        match key.as_str() {
            "window_s" => config.window = value.parse().unwrap_or(config.window),
            "max_min_runtime_s" => {
                config.max_min_runtime = value.parse().unwrap_or(config.max_min_runtime)
            }
            "damping_margin" => {
                config.damping_margin = value.parse().unwrap_or(config.damping_margin)
            }
            "kill_margin" => config.kill_margin = value.parse().unwrap_or(config.kill_margin),
            "heartbeat_deadline_s" => {
                config.heartbeat_deadline = value.parse().unwrap_or(config.heartbeat_deadline)
            }
            "grace_s" => config.grace = value.parse().unwrap_or(config.grace),
            "auto_recover_nodes" => {
                config.auto_recover_nodes = value.parse().unwrap_or(config.auto_recover_nodes)
            }
            "output_retention_days" => {
                config.retention.output_days = value.parse().unwrap_or(config.retention.output_days)
            }
            "event_retention_days" => {
                config.retention.event_days = value.parse().unwrap_or(config.retention.event_days)
            }
            "fiscal_start_month" => {
                config.fiscal_start_month = value
                    .parse()
                    .ok()
                    .filter(|m| (1..=12).contains(m))
                    .unwrap_or(config.fiscal_start_month)
            }
            "fast_lane" => config.fast_lane = value.parse().unwrap_or(config.fast_lane),
            "fast_lane_peak" => {
                config.fast_lane_peak = value.parse().unwrap_or(config.fast_lane_peak)
            }
            "fast_lane_window_s" => {
                config.fast_lane_window = value.parse().unwrap_or(config.fast_lane_window)
            }
            "headroom_fraction" => {
                config.headroom_fraction = value.parse().unwrap_or(config.headroom_fraction)
            }
            crate::demo::MARKER | crate::webhook::URL_KEY => {}
            _ => tracing::warn!(%key, "unknown setting ignored"),
        }
    }
    Ok(config)
}

pub async fn view(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
) -> Result<SettingsView, ServerError> {
    let config = runtime.config();
    let history = repo::history(pool).await?;
    Ok(SettingsView {
        window_days: config.window as f64 / DAY as f64,
        max_min_runtime_hours: config.max_min_runtime as f64 / HOUR as f64,
        damping_margin: config.damping_margin,
        kill_margin: config.kill_margin,
        heartbeat_deadline_s: config.heartbeat_deadline,
        grace_s: config.grace,
        auto_recover_nodes: config.auto_recover_nodes,
        output_retention_days: config.retention.output_days,
        event_retention_days: config.retention.event_days,
        fiscal_start_month: config.fiscal_start_month,
        fast_lane: config.fast_lane,
        fast_lane_peak: config.fast_lane_peak,
        fast_lane_window_minutes: config.fast_lane_window as f64 / 60.0,
        headroom_fraction: config.headroom_fraction,
        history: history
            .into_iter()
            .map(|c| {
                let (label, old_value) = in_form_units(&c.key, &c.old_value);
                let (_, new_value) = in_form_units(&c.key, &c.new_value);
                SettingChange {
                    at: c.changed_at,
                    by: c.username,
                    label: label.to_string(),
                    key: c.key,
                    old_value,
                    new_value,
                    reason: c.reason,
                }
            })
            .collect(),
        can_edit: actor.is_admin(),
    })
}

fn number(
    field: &'static str,
    raw: &str,
    label: &str,
    min: f64,
    max: f64,
) -> Result<f64, ServerError> {
    let value: f64 = raw.trim().parse().map_err(|_| {
        ServerError::invalid(
            field,
            format!("Enter the {label} as a number, not \"{}\".", raw.trim()),
        )
    })?;
    if !value.is_finite() || value < min || value > max {
        return Err(ServerError::invalid(
            field,
            format!("The {label} must be between {min} and {max}."),
        ));
    }
    Ok(value)
}

/// A number between `min` and `max` from an optional field; a field left out keeps `current`.
fn optional(
    field: &'static str,
    raw: Option<&str>,
    label: &str,
    (min, max): (f64, f64),
    current: f64,
) -> Result<f64, ServerError> {
    raw.map_or(Ok(current), |raw| number(field, raw, label, min, max))
}

/// A retention period in whole days, 1 to 3,650; a field left out keeps `current`.
fn days(
    field: &'static str,
    raw: Option<&str>,
    label: &str,
    current: u32,
) -> Result<u32, ServerError> {
    let Some(raw) = raw else {
        return Ok(current);
    };
    let value = number(field, raw, &format!("{label} (days)"), 1.0, 3650.0)?;
    if value.fract() != 0.0 {
        return Err(ServerError::invalid(
            field,
            format!("The {label} is a whole number of days, not {value}."),
        ));
    }
    Ok(value as u32)
}

/// The reason typed beside a change: trimmed, empty is none, at most 500 characters.
fn reason(raw: Option<&str>) -> Result<Option<&str>, ServerError> {
    let reason = raw.map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > 500) {
        return Err(ServerError::invalid(
            "reason",
            "Keep the reason to 500 characters; the history shows it beside each change.",
        ));
    }
    Ok(reason)
}

/// Validates every field (nothing changes unless all are valid), stores the changed ones with an
/// audit row each, and applies them to the running scheduler.
pub async fn update(
    pool: &AnyPool,
    runtime: &Runtime,
    actor: &CurrentUser,
    form: SettingsForm,
) -> Result<SettingsView, ServerError> {
    if !actor.is_admin() {
        return Err(ServerError::Forbidden(
            "Only administrators can change the scheduler's settings.".into(),
        ));
    }
    let old = runtime.config();
    let new = RuntimeConfig {
        window: (number(
            "window_days",
            &form.window_days,
            "lookback window (days)",
            0.25,
            90.0,
        )? * DAY as f64) as i64,
        max_min_runtime: (number(
            "max_min_runtime_hours",
            &form.max_min_runtime_hours,
            "minimum-runtime cap (hours)",
            // A cap of nothing would refuse every funded submission: at least a debug run's 15 min.
            0.25,
            168.0,
        )? * HOUR as f64) as i64,
        damping_margin: number(
            "damping_margin",
            &form.damping_margin,
            "damping margin",
            0.0,
            1.0,
        )?,
        kill_margin: optional(
            "kill_margin",
            form.kill_margin.as_deref(),
            "kill margin",
            (0.0, 1.0),
            old.kill_margin,
        )?,
        heartbeat_deadline: number(
            "heartbeat_deadline_s",
            &form.heartbeat_deadline_s,
            "heartbeat deadline (seconds)",
            3.0,
            3600.0,
        )? as i64,
        grace: number(
            "grace_s",
            &form.grace_s,
            "grace period (seconds)",
            0.0,
            600.0,
        )? as i64,
        auto_recover_nodes: form.auto_recover_nodes,
        retention: crate::workloads::retention::Retention {
            output_days: days(
                "output_retention_days",
                form.output_retention_days.as_deref(),
                "output retention",
                old.retention.output_days,
            )?,
            event_days: days(
                "event_retention_days",
                form.event_retention_days.as_deref(),
                "timeline retention",
                old.retention.event_days,
            )?,
        },
        fiscal_start_month: match form.fiscal_start_month.as_deref() {
            None => old.fiscal_start_month,
            Some(raw) => number(
                "fiscal_start_month",
                raw,
                "month the fiscal year starts in",
                1.0,
                12.0,
            )? as u32,
        },
        fast_lane: optional(
            "fast_lane",
            form.fast_lane.as_deref(),
            "fast lane share",
            (0.0, 0.5),
            old.fast_lane,
        )?,
        fast_lane_peak: optional(
            "fast_lane_peak",
            form.fast_lane_peak.as_deref(),
            "fast lane peak",
            (0.0, 1.0),
            old.fast_lane_peak,
        )?,
        fast_lane_window: match form.fast_lane_window_minutes.as_deref() {
            None => old.fast_lane_window,
            Some(raw) => (number(
                "fast_lane_window_minutes",
                raw,
                "fast lane window (minutes)",
                1.0,
                1440.0,
            )? * 60.0)
                .round() as i64,
        },
        headroom_fraction: optional(
            "headroom_fraction",
            form.headroom_fraction.as_deref(),
            "headroom for debug work",
            (0.0, 0.2),
            old.headroom_fraction,
        )?,
        ..old
    };
    if new.fast_lane_peak < new.fast_lane {
        return Err(ServerError::invalid(
            "fast_lane_peak",
            format!(
                "The fast lane's peak is the most it may hold at once, so it is at least its \
                 share ({}), not {}.",
                new.fast_lane, new.fast_lane_peak
            ),
        ));
    }
    if new.kill_margin < new.damping_margin {
        return Err(ServerError::invalid(
            "kill_margin",
            format!(
                "The kill margin guards work that cannot resume, so it is at least the damping \
                 margin ({}), not {}.",
                new.damping_margin, new.kill_margin
            ),
        ));
    }
    let changes = [
        ("window_s", old.window.to_string(), new.window.to_string()),
        (
            "max_min_runtime_s",
            old.max_min_runtime.to_string(),
            new.max_min_runtime.to_string(),
        ),
        (
            "damping_margin",
            old.damping_margin.to_string(),
            new.damping_margin.to_string(),
        ),
        (
            "kill_margin",
            old.kill_margin.to_string(),
            new.kill_margin.to_string(),
        ),
        (
            "heartbeat_deadline_s",
            old.heartbeat_deadline.to_string(),
            new.heartbeat_deadline.to_string(),
        ),
        ("grace_s", old.grace.to_string(), new.grace.to_string()),
        (
            "auto_recover_nodes",
            old.auto_recover_nodes.to_string(),
            new.auto_recover_nodes.to_string(),
        ),
        (
            "output_retention_days",
            old.retention.output_days.to_string(),
            new.retention.output_days.to_string(),
        ),
        (
            "event_retention_days",
            old.retention.event_days.to_string(),
            new.retention.event_days.to_string(),
        ),
        (
            "fiscal_start_month",
            old.fiscal_start_month.to_string(),
            new.fiscal_start_month.to_string(),
        ),
        (
            "fast_lane",
            old.fast_lane.to_string(),
            new.fast_lane.to_string(),
        ),
        (
            "fast_lane_peak",
            old.fast_lane_peak.to_string(),
            new.fast_lane_peak.to_string(),
        ),
        (
            "fast_lane_window_s",
            old.fast_lane_window.to_string(),
            new.fast_lane_window.to_string(),
        ),
        (
            "headroom_fraction",
            old.headroom_fraction.to_string(),
            new.headroom_fraction.to_string(),
        ),
    ];
    let reason = reason(form.reason.as_deref())?;
    let now = runtime.now();
    let mut tx = crate::db::begin_write(pool).await?;
    for (key, before, after) in changes.iter().filter(|(_, before, after)| before != after) {
        repo::change(&mut tx, key, before, after, reason, actor.id, now).await?;
        tracing::info!(admin = %actor.username, %key, %before, %after, "setting changed");
    }
    crate::runtime::lease::bump_settings(&mut tx).await?;
    tx.commit().await?;
    runtime.set_config(new);
    view(pool, runtime, actor).await
}
