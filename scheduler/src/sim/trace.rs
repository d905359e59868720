//! `TRACE.csv` (DESIGN §6): one workload a row, hand-parsed so every error names its line.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::input::InputError;
use crate::ids::{BudgetId, Time};
use crate::tree::BudgetTree;

/// The header every trace starts with.
pub const TRACE_HEADER: &str =
    "id,submit_s,project,user,gpus,duration_s,min_runtime_s,resumable,priority";

/// One workload of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRow {
    /// As written in the trace; unique.
    pub id: String,
    /// The 1-based line it came from.
    pub line: usize,
    pub submit: Time,
    pub project: String,
    pub leaf: BudgetId,
    pub user: String,
    pub gpus: u32,
    /// Run time needed to finish.
    pub duration: Time,
    pub min_runtime: Time,
    pub resumable: bool,
    pub priority: i32,
}

/// Parses a trace against the tree its projects are leaves of. Rows may come in any order.
pub fn parse_trace(text: &str, tree: &BudgetTree) -> Result<Vec<TraceRow>, InputError> {
    let mut lines = text.lines().enumerate();
    let header = lines
        .by_ref()
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or_else(|| InputError::new(Some(1), None, "empty trace: expected the header"))?;
    if header.1.trim() != TRACE_HEADER {
        return Err(InputError::new(
            Some(header.0 + 1),
            None,
            format!("expected the header `{TRACE_HEADER}`"),
        ));
    }
    let mut rows = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, raw) in lines {
        let line = i + 1;
        let raw = raw.trim_end_matches('\r');
        if raw.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = raw.split(',').map(str::trim).collect();
        if cells.len() != 9 {
            return Err(InputError::new(
                Some(line),
                None,
                format!("expected 9 comma-separated fields, found {}", cells.len()),
            ));
        }
        let id = cells[0];
        if id.is_empty() {
            return Err(InputError::at(line, "id", "must not be empty"));
        }
        if !ids.insert(id.to_string()) {
            return Err(InputError::at(line, "id", format!("`{id}` appears twice")));
        }
        let submit = whole(cells[1], line, "submit_s", 0)?;
        let project = cells[2];
        let leaf = tree
            .leaf(project)
            .map_err(|e| InputError::at(line, "project", e.to_string()))?;
        let gpus = whole(cells[4], line, "gpus", 1)?;
        let gpus = u32::try_from(gpus)
            .map_err(|_| InputError::at(line, "gpus", format!("`{}` is too large", cells[4])))?;
        let duration = whole(cells[5], line, "duration_s", 1)?;
        let min_runtime = whole(cells[6], line, "min_runtime_s", 0)?;
        let resumable = match cells[7] {
            "true" | "1" => true,
            "false" | "0" => false,
            other => {
                return Err(InputError::at(
                    line,
                    "resumable",
                    format!("expected `true` or `false`, got `{other}`"),
                ))
            }
        };
        let priority = cells[8].parse::<i32>().map_err(|_| {
            InputError::at(
                line,
                "priority",
                format!("expected an integer, got `{}`", cells[8]),
            )
        })?;
        rows.push(TraceRow {
            id: id.to_string(),
            line,
            submit,
            project: project.to_string(),
            leaf,
            user: cells[3].to_string(),
            gpus,
            duration,
            min_runtime,
            resumable,
            priority,
        });
    }
    Ok(rows)
}

fn whole(cell: &str, line: usize, field: &str, min: i64) -> Result<i64, InputError> {
    cell.parse::<i64>()
        .ok()
        .filter(|v| *v >= min)
        .ok_or_else(|| {
            InputError::at(
                line,
                field,
                format!("expected a whole number ≥ {min}, got `{cell}`"),
            )
        })
}

/// A row to write: what the generator and the Philly converter produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub id: String,
    pub submit: Time,
    pub project: String,
    pub user: String,
    pub gpus: u32,
    pub duration: Time,
    pub min_runtime: Time,
    pub resumable: bool,
    pub priority: i32,
}

/// Writes records as `TRACE.csv` text, header first, in the order given.
pub fn write_trace(records: &[TraceRecord]) -> String {
    let mut out = String::with_capacity(48 * (records.len() + 1));
    out.push_str(TRACE_HEADER);
    out.push('\n');
    for r in records {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            r.id,
            r.submit,
            r.project,
            r.user,
            r.gpus,
            r.duration,
            r.min_runtime,
            r.resumable,
            r.priority
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> BudgetTree {
        BudgetTree::from_paths([("a", 1.0), ("a/x", 1.0), ("b", 1.0)]).unwrap()
    }

    #[test]
    fn a_trace_round_trips_through_text() {
        let records = vec![TraceRecord {
            id: "w1".into(),
            submit: 60,
            project: "a/x".into(),
            user: String::new(),
            gpus: 2,
            duration: 600,
            min_runtime: 300,
            resumable: true,
            priority: 1,
        }];
        let rows = parse_trace(&write_trace(&records), &tree()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].line, 2);
        assert_eq!(rows[0].leaf, tree().leaf("a/x").unwrap());
        assert_eq!((rows[0].gpus, rows[0].min_runtime), (2, 300));
    }

    #[test]
    fn a_bad_row_is_reported_with_its_line_and_field() {
        let text = format!("{TRACE_HEADER}\n1,0,b,,1,10,0,true,0\n2,5,b,,zero,10,0,true,0\n");
        let err = parse_trace(&text, &tree()).unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(err.field.as_deref(), Some("gpus"));
    }

    #[test]
    fn a_row_charged_to_an_inner_node_is_rejected() {
        let text = format!("{TRACE_HEADER}\n1,0,a,,1,10,0,true,0\n");
        let err = parse_trace(&text, &tree()).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("project"));
        assert!(err.message.contains("workloads are charged to leaves"));
    }

    #[test]
    fn a_wrong_header_is_rejected() {
        let err = parse_trace("id,submit\n", &tree()).unwrap_err();
        assert_eq!(err.line, Some(1));
    }
}
