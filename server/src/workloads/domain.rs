//! A submission, validated once into a [`NewWorkload`].

use crate::ServerError;
use app::workloads::{SubmitForm, WorkloadState};
use serde::Deserialize;

/// The body of `POST /api/v1/workloads` (and the submit form).
#[derive(Debug, Clone, Deserialize)]
pub struct SubmitWorkload {
    pub project: String,
    pub name: String,
    pub command: String,
    pub gpus: i64,
    #[serde(default)]
    pub min_runtime_s: i64,
    #[serde(default)]
    pub resumable: bool,
    #[serde(default)]
    pub priority: i64,
    /// Required when more than one cluster has nodes.
    #[serde(default)]
    pub cluster: Option<String>,
}

impl SubmitWorkload {
    /// The Submit form's fields as typed: numbers must be whole; blank means 0.
    pub fn from_form(form: SubmitForm) -> Result<SubmitWorkload, ServerError> {
        Ok(SubmitWorkload {
            gpus: whole("gpus", &form.gpus, "the GPU count")?,
            min_runtime_s: app::workloads::duration::parse_duration(&form.min_runtime).ok_or_else(|| {
                ServerError::invalid(
                    "min_runtime_s",
                    format!(
                        "Enter the minimum runtime as a duration such as 15 min, 2 h or 1 h 30 min (0 makes it free), not \"{}\".",
                        form.min_runtime.trim()
                    ),
                )
            })?,
            priority: whole("priority", &form.priority, "the priority")?,
            project: form.project,
            name: form.name,
            command: form.command,
            resumable: form.resumable,
            cluster: Some(form.cluster),
        })
    }
}

/// A form field that must be a whole number; blank is 0.
fn whole(field: &'static str, raw: &str, what: &str) -> Result<i64, ServerError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(0);
    }
    raw.parse().map_err(|_| {
        ServerError::invalid(
            field,
            format!("Enter {what} as a whole number, not \"{raw}\"."),
        )
    })
}

/// A valid submission (the project is resolved against the tree and membership by the service).
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkload {
    pub project: String,
    pub name: String,
    pub command: String,
    pub gpus: u32,
    pub min_runtime_s: i64,
    pub resumable: bool,
    pub priority: i32,
    /// As named; resolved against the clusters by the service.
    pub cluster: Option<String>,
}

impl NewWorkload {
    /// Checks every field that needs no database; `max_min_runtime` is the configured cap.
    pub fn parse(input: SubmitWorkload, max_min_runtime: i64) -> Result<NewWorkload, ServerError> {
        let project = input.project.trim().trim_matches('/').to_string();
        if project.is_empty() {
            return Err(ServerError::invalid(
                "project",
                "Choose the project to charge this workload to.",
            ));
        }
        let name = input.name.trim().to_string();
        if name.is_empty() {
            return Err(ServerError::invalid("name", "Give the workload a name."));
        }
        if name.chars().count() > 120 {
            return Err(ServerError::invalid(
                "name",
                "A name has at most 120 characters.",
            ));
        }
        let command = input.command.trim().to_string();
        if command.is_empty() {
            return Err(ServerError::invalid("command", "Enter the command to run."));
        }
        if command.len() > 16_384 {
            return Err(ServerError::invalid(
                "command",
                "A command has at most 16 KiB.",
            ));
        }
        if input.gpus < 1 {
            return Err(ServerError::invalid(
                "gpus",
                "A workload needs at least 1 GPU.",
            ));
        }
        if input.min_runtime_s < 0 {
            return Err(ServerError::invalid(
                "min_runtime_s",
                "The minimum runtime cannot be negative.",
            ));
        }
        if input.min_runtime_s > max_min_runtime {
            return Err(ServerError::invalid(
                "min_runtime_s",
                format!(
                    "The minimum runtime may be at most {} ({} s); {} s was asked.",
                    app::workloads::sentences::duration(max_min_runtime),
                    max_min_runtime,
                    input.min_runtime_s
                ),
            ));
        }
        let priority = i32::try_from(input.priority)
            .ok()
            .filter(|p| (-1000..=1000).contains(p))
            .ok_or_else(|| {
                ServerError::invalid(
                    "priority",
                    "The priority is a whole number from -1000 to 1000.",
                )
            })?;
        Ok(NewWorkload {
            project,
            name,
            command,
            gpus: u32::try_from(input.gpus).unwrap_or(u32::MAX),
            min_runtime_s: input.min_runtime_s,
            resumable: input.resumable,
            priority,
            cluster: input.cluster,
        })
    }
}

/// A state filter as typed in a query or the Workloads page's menu: empty or `all` is any state.
pub fn state_filter(raw: Option<&str>) -> Result<Option<WorkloadState>, ServerError> {
    match raw.map(str::trim) {
        None | Some("") | Some("all") => Ok(None),
        Some(name) => name.parse().map(Some).map_err(|_| {
            let names: Vec<&str> = WorkloadState::ALL.iter().map(|s| s.as_str()).collect();
            ServerError::invalid(
                "state",
                format!("Unknown state \"{name}\": use one of {}.", names.join(", ")),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> SubmitWorkload {
        SubmitWorkload {
            project: "ai/olmo".into(),
            name: "sweep".into(),
            command: "python train.py".into(),
            gpus: 2,
            min_runtime_s: 900,
            resumable: true,
            priority: 0,
            cluster: None,
        }
    }

    fn field_of(result: Result<NewWorkload, ServerError>) -> &'static str {
        match result {
            Err(ServerError::Invalid { field, .. }) => field,
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_submission_parses() {
        let w = NewWorkload::parse(input(), 8 * 3600).unwrap();
        assert_eq!((w.gpus, w.min_runtime_s), (2, 900));
    }

    #[test]
    fn each_bad_field_is_named() {
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload {
                    command: " ".into(),
                    ..input()
                },
                28_800
            )),
            "command"
        );
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload { gpus: 0, ..input() },
                28_800
            )),
            "gpus"
        );
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload {
                    min_runtime_s: 28_801,
                    ..input()
                },
                28_800
            )),
            "min_runtime_s"
        );
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload {
                    project: "".into(),
                    ..input()
                },
                28_800
            )),
            "project"
        );
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload {
                    name: "".into(),
                    ..input()
                },
                28_800
            )),
            "name"
        );
        assert_eq!(
            field_of(NewWorkload::parse(
                SubmitWorkload {
                    priority: 5000,
                    ..input()
                },
                28_800
            )),
            "priority"
        );
    }
}
