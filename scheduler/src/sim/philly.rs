//! Converts the Microsoft Philly trace, split by virtual cluster (`vc,app_id,submit_time_s,
//! num_gpus,duration_s`), into the simulator's three files. Each VC is a team (a leaf of a flat
//! tree) funded by its published capacity; the cluster is the sum of those capacities.
//!
//! The trace has no minimum runtime, resumability, user or priority, so the converter chooses:
//! - **minimum runtime**: 10 minutes for jobs of at most 15 minutes (debug-like); otherwise a
//!   quarter of the job's run time, at least 30 minutes, at most 8 hours, rounded up to 5 minutes;
//! - **resumable**: jobs longer than an hour, or on more than one GPU (they checkpoint); short
//!   single-GPU jobs are not;
//! - **priority** 0 and an empty user for every job;
//! - VC clocks are not aligned in the source: each VC's first job is taken as time 0, and only
//!   jobs submitted within the first `days` are kept.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::input::InputError;
use super::scenario::Scenario;
use super::trace::{write_trace, TraceRecord};
use crate::ids::{Time, DAY, HOUR};

/// Published per-VC capacities in GPUs; VCs not listed get [`DEFAULT_VC_GPUS`].
pub const VC_GPUS: [(&str, u32); 11] = [
    ("6214e9", 64),
    ("b436b2", 64),
    ("ee9e8c", 64),
    ("7f04ca", 32),
    ("6c71a0", 32),
    ("0e4a51", 32),
    ("11cb48", 16),
    ("e13805", 16),
    ("2869ce", 16),
    ("ed69ec", 8),
    ("103959", 8),
];
pub const DEFAULT_VC_GPUS: u32 = 8;
const HOST_GPUS: u32 = 8;

/// What the conversion kept and dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    pub scenario: Scenario,
    pub jobs: usize,
    pub teams: usize,
    pub gpus: u32,
    /// Jobs after the window, or asking for more GPUs than the whole cluster.
    pub skipped: usize,
}

/// The minimum runtime the converter gives a job of this run time.
pub fn min_runtime_for(duration: Time) -> Time {
    if duration <= 15 * 60 {
        10 * 60
    } else {
        let quarter = (duration / 4).clamp(30 * 60, 8 * HOUR);
        (quarter + 299) / 300 * 300
    }
}

/// Whether the converter makes a job resumable.
pub fn resumable_for(gpus: u32, duration: Time) -> bool {
    gpus > 1 || duration > HOUR
}

/// Converts `philly_by_vc.csv` text, keeping each VC's first `days`.
pub fn convert(text: &str, days: u32) -> Result<Converted, InputError> {
    let mut lines = text.lines().enumerate();
    let header = "vc,app_id,submit_time_s,num_gpus,duration_s";
    match lines.next() {
        Some((_, h)) if h.trim() == header => {}
        _ => {
            return Err(InputError::new(
                Some(1),
                None,
                format!("expected the header `{header}`"),
            ))
        }
    }
    let window = Time::from(days) * DAY;
    let mut rows: Vec<(String, String, Time, u32, Time)> = Vec::new();
    let mut skipped = 0;
    let mut seen = std::collections::HashSet::new();
    for (i, raw) in lines {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = raw.split(',').map(str::trim).collect();
        if cells.len() != 5 {
            return Err(InputError::new(
                Some(line),
                None,
                format!("expected 5 fields, found {}", cells.len()),
            ));
        }
        let number = |k: usize, field: &str| {
            cells[k]
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    InputError::at(
                        line,
                        field,
                        format!("expected a number ≥ 0, got `{}`", cells[k]),
                    )
                })
        };
        let submit = number(2, "submit_time_s")?.floor() as Time;
        let gpus = number(3, "num_gpus")? as u32;
        let duration = (number(4, "duration_s")?.round() as Time).max(1);
        if gpus == 0 {
            return Err(InputError::at(line, "num_gpus", "must be at least 1"));
        }
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !name_ok(cells[0]) {
            return Err(InputError::at(
                line,
                "vc",
                "expected letters, digits, '-', '_' or '.' (at most 64)",
            ));
        }
        if !name_ok(cells[1]) {
            return Err(InputError::at(
                line,
                "app_id",
                "expected letters, digits, '-', '_' or '.' (at most 64)",
            ));
        }
        if !seen.insert((cells[0].to_string(), cells[1].to_string())) {
            return Err(InputError::at(
                line,
                "app_id",
                format!("job {}-{} appears twice", cells[0], cells[1]),
            ));
        }
        if submit >= window {
            skipped += 1;
            continue;
        }
        rows.push((
            cells[0].to_string(),
            cells[1].to_string(),
            submit,
            gpus,
            duration,
        ));
    }
    if rows.is_empty() {
        return Err(InputError::new(
            None,
            None,
            format!("no job was submitted in the first {days} days"),
        ));
    }
    let mut vcs: BTreeMap<String, u32> = BTreeMap::new();
    for r in &rows {
        let gpus = VC_GPUS
            .iter()
            .find(|v| v.0 == r.0)
            .map_or(DEFAULT_VC_GPUS, |v| v.1);
        vcs.insert(r.0.clone(), gpus);
    }
    let total: u32 = vcs.values().sum();
    let before = rows.len();
    rows.retain(|r| r.3 <= total);
    skipped += before - rows.len();
    rows.sort_by(|a, b| (a.2, &a.0, &a.1).cmp(&(b.2, &b.0, &b.1)));
    let records: Vec<TraceRecord> = rows
        .iter()
        .map(|(vc, app, submit, gpus, duration)| TraceRecord {
            id: format!("{vc}-{app}"),
            submit: *submit,
            project: format!("philly/{vc}"),
            user: String::new(),
            gpus: *gpus,
            duration: *duration,
            min_runtime: min_runtime_for(*duration),
            resumable: resumable_for(*gpus, *duration),
            priority: 0,
        })
        .collect();

    let mut tree = String::from("# Philly: one leaf per virtual cluster, funded by its capacity.\n[shares]\n\"philly\" = 1\n");
    for (vc, gpus) in &vcs {
        let _ = writeln!(tree, "\"philly/{vc}\" = {gpus}");
    }
    let cluster = format!(
        "# The VCs' capacities together, in hosts of {HOST_GPUS} GPUs.\n[[nodes]]\ncount = {}\ngpus_per_node = {HOST_GPUS}\nname_prefix = \"philly-\"\n",
        total.div_ceil(HOST_GPUS)
    );
    Ok(Converted {
        jobs: records.len(),
        teams: vcs.len(),
        gpus: total.div_ceil(HOST_GPUS) * HOST_GPUS,
        skipped,
        scenario: Scenario {
            tree_toml: tree,
            cluster_toml: cluster,
            trace_csv: write_trace(&records),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimInput;

    #[test]
    fn min_runtime_and_resumability_follow_the_stated_rules() {
        assert_eq!(min_runtime_for(600), 600);
        assert_eq!(min_runtime_for(2 * HOUR), 30 * 60);
        assert_eq!(min_runtime_for(10 * HOUR + 7), 9_300);
        assert_eq!(min_runtime_for(100 * HOUR), 8 * HOUR);
        assert!(!resumable_for(1, 600));
        assert!(resumable_for(2, 600));
        assert!(resumable_for(1, 2 * HOUR));
    }

    #[test]
    fn a_philly_extract_converts_into_files_the_simulator_accepts() {
        let text = "vc,app_id,submit_time_s,num_gpus,duration_s\n\
                    0e4a51,0,0.0,1,16482\n0e4a51,1,6.0,4,300\nzz0000,0,3.5,8,7200\n\
                    zz0000,1,999999999.0,1,10\n";
        let c = convert(text, 30).unwrap();
        assert_eq!((c.jobs, c.teams, c.skipped, c.gpus), (3, 2, 1, 40));
        let s = &c.scenario;
        let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
        assert_eq!(input.trace.len(), 3);
        assert_eq!(input.trace[1].id, "zz0000-0");
    }

    #[test]
    fn a_bad_philly_row_names_its_line_and_field() {
        let text = "vc,app_id,submit_time_s,num_gpus,duration_s\n0e4a51,0,x,1,5\n";
        let err = convert(text, 30).unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(2), Some("submit_time_s"))
        );
    }
}
