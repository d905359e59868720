//! Turning a lab form into a simulator input: the generated reference-like scenario, the Philly
//! trace (read from where the operator pointed the server), or three uploaded files. Every error
//! names the form field it belongs to, and for files the line and column.

use crate::ServerError;
use app::lab::LabForm;
use scheduler::sim::{self, philly, scenario, InputFile, SimConfig, SimInput};
use std::path::Path;

/// The largest uploaded file the lab accepts, in bytes.
pub const MAX_UPLOAD_BYTES: usize = 32 * 1024 * 1024;
/// The longest period the lab simulates, in days.
pub const MAX_DAYS: u32 = 90;

/// A validated lab request: what to simulate, described in words, and how.
pub struct Resolved {
    pub label: String,
    pub input: SimInput,
    pub config: SimConfig,
}

/// Validates `form` and builds its input. Slow for big inputs (generates or parses a trace):
/// call it off the async runtime.
pub fn resolve(form: &LabForm, philly_trace: Option<&Path>) -> Result<Resolved, ServerError> {
    let config = config(form)?;
    let (label, input) = match form.source.as_str() {
        "reference" => {
            let seed = whole(&form.seed, "seed", "The seed", u64::MAX)?;
            let days = days(&form.days)?;
            let s = scenario::generate(&scenario::ScenarioConfig::reference(seed, days as u32));
            let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv)
                .map_err(|e| ServerError::Config(format!("generated scenario: {e}")))?;
            (
                format!("Reference-like scenario, seed {seed}, {}", days_in_words(days)),
                input,
            )
        }
        "philly" => {
            let path = philly_trace.ok_or_else(|| {
                ServerError::invalid("source", "This server has no Philly trace to offer; upload files instead.")
            })?;
            let days = days(&form.days)?;
            let text = std::fs::read_to_string(path).map_err(|e| {
                ServerError::Config(format!("cannot read the Philly trace {}: {e}", path.display()))
            })?;
            let converted = philly::convert(&text, days as u32).map_err(|e| {
                ServerError::Config(format!("the Philly trace {}: {e}", path.display()))
            })?;
            let s = &converted.scenario;
            let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv)
                .map_err(|e| ServerError::Config(format!("converted Philly trace: {e}")))?;
            (
                format!(
                    "Philly trace, first {} ({} jobs of {} teams on {} GPUs)",
                    days_in_words(days),
                    converted.jobs, converted.teams, converted.gpus
                ),
                input,
            )
        }
        "upload" => {
            for (field, text, what) in [
                ("tree", &form.tree, "tree TOML"),
                ("cluster", &form.cluster, "cluster TOML"),
                ("trace", &form.trace, "trace CSV"),
            ] {
                if text.trim().is_empty() {
                    return Err(ServerError::invalid(field, format!("Choose a {what} file.")));
                }
                if text.len() > MAX_UPLOAD_BYTES {
                    return Err(ServerError::invalid(
                        field,
                        format!(
                            "The {what} file is {:.1} MB; the lab accepts up to {} MB.",
                            text.len() as f64 / 1e6,
                            MAX_UPLOAD_BYTES / (1024 * 1024)
                        ),
                    ));
                }
            }
            let input = SimInput::parse(&form.tree, &form.cluster, &form.trace).map_err(|e| {
                let (field, file) = match e.file {
                    InputFile::Tree => ("tree", "tree file"),
                    InputFile::Cluster => ("cluster", "cluster file"),
                    InputFile::Trace => ("trace", "trace file"),
                };
                ServerError::invalid(field, format!("The {file}: {}", e.error))
            })?;
            if input.trace.is_empty() {
                return Err(ServerError::invalid("trace", "The trace file has no workloads."));
            }
            (
                format!(
                    "Uploaded files ({} workloads on {} GPUs)",
                    input.trace.len(),
                    input.cluster.total_gpus()
                ),
                input,
            )
        }
        "" => return Err(ServerError::invalid("source", "Choose what to simulate.")),
        other => {
            return Err(ServerError::invalid(
                "source",
                format!("Unknown input \"{other}\": choose the reference-like scenario, the Philly trace or uploaded files."),
            ))
        }
    };
    Ok(Resolved {
        label,
        input,
        config,
    })
}

fn config(form: &LabForm) -> Result<SimConfig, ServerError> {
    let duration = |raw: &str, field: &'static str, what: &str, default: &str| {
        let raw = if raw.trim().is_empty() { default } else { raw };
        sim::parse_duration(raw).map_err(|e| {
            ServerError::invalid(
                field,
                format!("Enter the {what} as a duration such as 7d, 12h or 90m ({e})."),
            )
        })
    };
    let window = duration(&form.window, "window", "lookback window", "7d")?;
    if window < 3_600 {
        return Err(ServerError::invalid(
            "window",
            "The lookback window must be at least 1h.",
        ));
    }
    let max_min_runtime = duration(
        &form.max_min_runtime,
        "max_min_runtime",
        "maximum minimum runtime",
        "8h",
    )?;
    Ok(SimConfig {
        window,
        max_min_runtime,
        ..SimConfig::default()
    })
}

/// `1 day`, `30 days`.
fn days_in_words(days: u64) -> String {
    if days == 1 {
        "1 day".into()
    } else {
        format!("{days} days")
    }
}

fn days(raw: &str) -> Result<u64, ServerError> {
    let days = whole(raw, "days", "The number of days", u64::from(MAX_DAYS))?;
    if days == 0 {
        return Err(ServerError::invalid("days", "Simulate at least 1 day."));
    }
    Ok(days)
}

fn whole(raw: &str, field: &'static str, what: &str, max: u64) -> Result<u64, ServerError> {
    let raw = raw.trim();
    let value: u64 = raw.parse().map_err(|_| {
        ServerError::invalid(
            field,
            if raw.is_empty() {
                format!("{what} is required.")
            } else {
                format!("{what} must be a whole number, not \"{raw}\".")
            },
        )
    })?;
    if value > max {
        return Err(ServerError::invalid(
            field,
            format!("{what} can be at most {max}."),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(source: &str) -> LabForm {
        LabForm {
            source: source.into(),
            seed: "1".into(),
            days: "1".into(),
            ..LabForm::default()
        }
    }

    #[test]
    fn the_reference_scenario_is_generated_from_its_seed_and_days() {
        let r = resolve(&form("reference"), None).unwrap();
        assert_eq!(r.label, "Reference-like scenario, seed 1, 1 day");
        assert_eq!(r.input.cluster.total_gpus(), 1024);
        assert!(!r.input.trace.is_empty());
        assert_eq!(r.config.window, 7 * 86_400);
    }

    #[test]
    fn bad_numbers_and_durations_name_their_field() {
        let field = |f: LabForm| match resolve(&f, None) {
            Err(ServerError::Invalid { field, .. }) => field,
            other => panic!("expected a field error, got {:?}", other.map(|r| r.label)),
        };
        assert_eq!(
            field(LabForm {
                days: "0".into(),
                ..form("reference")
            }),
            "days"
        );
        assert_eq!(
            field(LabForm {
                days: "91".into(),
                ..form("reference")
            }),
            "days"
        );
        assert_eq!(
            field(LabForm {
                seed: "x".into(),
                ..form("reference")
            }),
            "seed"
        );
        assert_eq!(
            field(LabForm {
                window: "soon".into(),
                ..form("reference")
            }),
            "window"
        );
        assert_eq!(
            field(LabForm {
                window: "30m".into(),
                ..form("reference")
            }),
            "window"
        );
        assert_eq!(field(form("philly")), "source");
        assert_eq!(field(form("")), "source");
        assert_eq!(field(form("upload")), "tree");
    }

    #[test]
    fn an_uploaded_file_with_an_error_names_the_file_and_line() {
        let s = scenario::generate(&scenario::ScenarioConfig::reference(1, 1));
        let mut trace = s.trace_csv.clone();
        trace.push_str("broken,line\n");
        let f = LabForm {
            tree: s.tree_toml,
            cluster: s.cluster_toml,
            trace,
            ..form("upload")
        };
        match resolve(&f, None) {
            Err(ServerError::Invalid { field, message }) => {
                assert_eq!(field, "trace");
                assert!(message.starts_with("The trace file: line "), "{message}");
            }
            other => panic!("expected a trace error, got {:?}", other.map(|r| r.label)),
        }
    }
}
