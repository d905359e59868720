//! `hourglass simulate`: reads the input files, runs the pure simulator in `scheduler::sim`, prints
//! the summary table and writes the report (and timeline). Parsing and simulating happen in the
//! scheduler crate; this module only does the file IO and times the run.

mod args;

/// `println!` that shrugs off a closed standard output (`hourglass simulate … | head`): the
/// files are written either way, and a broken pipe is no reason to panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub use args::{PolicyChoice, SimulateArgs, SimulateCommand};

use crate::ServerError;
use scheduler::sim::{self, philly, scenario, InputFile, SimConfig, SimInput};
use scheduler::Policy;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub fn run(args: SimulateArgs) -> Result<(), ServerError> {
    match args.command.clone() {
        Some(SimulateCommand::Scenario {
            seed,
            days,
            debug_per_day,
            out_dir,
        }) => {
            let s = scenario::generate(&scenario::ScenarioConfig {
                debug_per_day: f64::from(debug_per_day),
                ..scenario::ScenarioConfig::reference(seed, days)
            });
            write_inputs(&out_dir, &s)?;
            say!(
                "wrote {} workloads over {days} days (seed {seed})",
                s.trace_csv.lines().count().saturating_sub(1)
            );
            Ok(())
        }
        Some(SimulateCommand::Philly {
            input,
            days,
            out_dir,
        }) => {
            let text = read(&input)?;
            let c = philly::convert(&text, days)
                .map_err(|e| ServerError::invalid("input", format!("{}: {e}", input.display())))?;
            write_inputs(&out_dir, &c.scenario)?;
            say!(
                "wrote {} jobs of {} teams on {} GPUs ({} skipped: after {days} days or larger than the cluster)",
                c.jobs, c.teams, c.gpus, c.skipped
            );
            Ok(())
        }
        Some(SimulateCommand::Matrix {
            seed,
            days,
            philly,
            out_dir,
        }) => matrix(seed, days, philly.as_deref(), &out_dir),
        None => simulate(&args),
    }
}

fn matrix(seed: u64, days: u32, philly: Option<&Path>, out_dir: &Path) -> Result<(), ServerError> {
    if days == 0 {
        return Err(ServerError::invalid("days", "--days must be at least 1"));
    }
    let text = philly.map(read).transpose()?;
    let members = sim::family::members(seed, days, text.as_deref()).map_err(|e| {
        let file = philly.map(|p| p.display().to_string()).unwrap_or_default();
        ServerError::invalid("philly", format!("{file}: {e}"))
    })?;
    let mut rows = Vec::new();
    for (k, member) in members.iter().enumerate() {
        say!(
            "[{}/{}] {}: {}",
            k + 1,
            members.len(),
            member.name,
            member.about
        );
        let dir = out_dir.join(member.name);
        write_inputs(&dir, &member.scenario)?;
        let row = sim::family::run_member(member, &SimConfig::default(), |run| {
            let started = Instant::now();
            let mut report = run();
            report.wall_s = (started.elapsed().as_secs_f64() * 1e3).round() / 1e3;
            report
        })
        .map_err(|e| ServerError::invalid("scenario", e.to_string()))?;
        write(&dir.join("report.json"), &sim::reports_json(&row.reports()))?;
        rows.push(row);
    }
    let table = sim::family::matrix_table(&rows);
    write(&out_dir.join("matrix.md"), &table)?;
    say!("{}", table.trim_end_matches('\n'));
    say!("matrix: {}", out_dir.join("matrix.md").display());
    Ok(())
}

fn simulate(args: &SimulateArgs) -> Result<(), ServerError> {
    let path = |p: &Option<PathBuf>, flag: &'static str| {
        p.clone()
            .ok_or_else(|| ServerError::invalid(flag, format!("--{flag} is required")))
    };
    let (tree, cluster, trace) = (
        path(&args.tree, "tree")?,
        path(&args.cluster, "cluster")?,
        path(&args.trace, "trace")?,
    );
    let duration = |text: &str, flag: &'static str| {
        sim::parse_duration(text).map_err(|e| ServerError::invalid(flag, format!("--{flag}: {e}")))
    };
    let base = SimConfig {
        window: duration(&args.window, "window")?,
        max_min_runtime: duration(&args.max_min_runtime, "max-min-runtime")?,
        horizon: args
            .horizon
            .as_deref()
            .map(|h| duration(h, "horizon"))
            .transpose()?,
        slurm: args.slurm.config(duration)?,
        time_limit_factor: args.slurm.limit_factor,
        kill_margin: args.kill_margin,
        ..SimConfig::default()
    };
    if !(0.0..=1.0).contains(&base.kill_margin) {
        return Err(ServerError::invalid(
            "kill-margin",
            "--kill-margin must be between 0 and 1 (a ratio of usage to a window's funded time)",
        ));
    }
    if !(1.0..=100.0).contains(&base.time_limit_factor) {
        return Err(ServerError::invalid(
            "slurm-limit-factor",
            "--slurm-limit-factor must be between 1 and 100 (limits are never below the true duration)",
        ));
    }
    for (value, flag) in [
        (base.slurm.decay_half_life, "slurm-half-life"),
        (base.slurm.max_age, "slurm-max-age"),
        (base.slurm.max_wall, "slurm-max-wall"),
    ] {
        if value < 60 {
            return Err(ServerError::invalid(
                flag,
                format!("--{flag} must be at least 1m"),
            ));
        }
    }
    if base.window < 3_600 {
        return Err(ServerError::invalid(
            "window",
            "--window must be at least 1h",
        ));
    }
    if args.timeline.is_some() && matches!(args.policy, PolicyChoice::Both | PolicyChoice::All) {
        return Err(ServerError::invalid(
            "timeline",
            "--timeline needs a single --policy (fair-share, priority or slurm)",
        ));
    }
    let input = SimInput::parse(&read(&tree)?, &read(&cluster)?, &read(&trace)?).map_err(|e| {
        let (field, file) = match e.file {
            InputFile::Tree => ("tree", &tree),
            InputFile::Cluster => ("cluster", &cluster),
            InputFile::Trace => ("trace", &trace),
        };
        ServerError::invalid(field, format!("{}: {}", file.display(), e.error))
    })?;

    let policies: &[Policy] = match args.policy {
        PolicyChoice::FairShare => &[Policy::FairShare],
        PolicyChoice::Priority => &[Policy::Priority],
        PolicyChoice::Slurm => &[Policy::Slurm],
        PolicyChoice::Both => &[Policy::FairShare, Policy::Priority],
        PolicyChoice::All => &[Policy::FairShare, Policy::Priority, Policy::Slurm],
    };
    let mut outputs = Vec::new();
    for &policy in policies {
        let started = Instant::now();
        let mut out = sim::run(&input, &SimConfig { policy, ..base });
        out.report.wall_s = (started.elapsed().as_secs_f64() * 1e6).round() / 1e6;
        outputs.push(out);
    }
    let reports: Vec<&sim::Report> = outputs.iter().map(|o| &o.report).collect();
    say!("{}", sim::summary_table(&reports).trim_end_matches('\n'));

    if let Some(out) = &args.out {
        let json = match reports.as_slice() {
            [one] => one.to_json(),
            several => sim::reports_json(several),
        };
        write(out, &json)?;
        say!("report: {}", out.display());
    }
    if let (Some(path), Some(first)) = (&args.timeline, outputs.first()) {
        write(path, &sim::timeline_csv(&input, &first.segments))?;
        say!("timeline: {}", path.display());
    }
    Ok(())
}

fn write_inputs(dir: &Path, s: &scenario::Scenario) -> Result<(), ServerError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| ServerError::invalid("out-dir", format!("{}: {e}", dir.display())))?;
    for (name, text) in [
        ("tree.toml", &s.tree_toml),
        ("cluster.toml", &s.cluster_toml),
        ("trace.csv", &s.trace_csv),
    ] {
        write(&dir.join(name), text)?;
    }
    say!(
        "wrote {}/{{tree.toml,cluster.toml,trace.csv}}",
        dir.display()
    );
    Ok(())
}

fn read(path: &Path) -> Result<String, ServerError> {
    std::fs::read_to_string(path)
        .map_err(|e| ServerError::invalid("file", format!("{}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), ServerError> {
    let mut text = text.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    std::fs::write(path, text)
        .map_err(|e| ServerError::invalid("file", format!("{}: {e}", path.display())))
}
