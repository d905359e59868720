//! Dates at the server's edge: the shared calendar ([`app::calendar`]) with errors that name the
//! input they came from.

use crate::ServerError;
pub use app::calendar::{iso, quarter, Fiscal};

/// `YYYY-MM-DD` typed into the change form → that day's 00:00 UTC; empty → `None` (on approval).
pub fn parse_date(raw: &str) -> Result<Option<i64>, ServerError> {
    app::calendar::parse_day(raw).map_err(|e| ServerError::invalid("effective_at", e.0))
}

/// An API parameter that is a moment (epoch seconds or ISO 8601); an error names the parameter.
pub fn moment(param: &'static str, raw: &str) -> Result<i64, ServerError> {
    app::calendar::parse_moment(raw)
        .map_err(|e| ServerError::invalid(param, format!("{param}: {e}")))
}

/// An optional moment parameter: absent or empty is `None`.
pub fn moment_opt(param: &'static str, raw: Option<&str>) -> Result<Option<i64>, ServerError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(raw) => moment(param, raw).map(Some),
    }
}
