//! `hourglass simulate`: the three policies on one trace from the command line, and the SLURM
//! peer's flags.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hourglass");

fn hourglass(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("runs")
}

/// `hourglass simulate scenario` into `out_dir`, with `more` flags.
fn scenario(out_dir: &std::path::Path, more: &[&str]) -> std::process::Output {
    let mut args = vec![
        "simulate",
        "scenario",
        "--out-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    hourglass(&args)
}

#[test]
fn policy_all_reports_fair_share_the_baseline_and_the_slurm_peer_with_its_time_limits() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    let made = scenario(&inputs, &["--seed", "2", "--days", "1"]);
    assert!(made.status.success(), "{made:?}");
    let file = |name: &str| inputs.join(name).to_str().unwrap().to_string();
    let (tree, cluster, trace) = (file("tree.toml"), file("cluster.toml"), file("trace.csv"));
    // `simulate` on those inputs, with `more` flags.
    let simulate = |more: &[&str]| {
        let mut args = vec![
            "simulate",
            "--tree",
            &tree,
            "--cluster",
            &cluster,
            "--trace",
            &trace,
        ];
        args.extend_from_slice(more);
        hourglass(&args)
    };
    let report = dir.path().join("report.json");
    let out = simulate(&[
        "--policy",
        "all",
        "--slurm-limit-factor",
        "3",
        "--slurm-calc-period",
        "10m",
        "--kill-margin",
        "0.25",
        "--out",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("true duration x3, at most 7.0 d (never below the duration)"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["fair_share"]["policy"], "fair-share");
    assert_eq!(json["priority"]["policy"], "priority");
    assert_eq!(json["slurm"]["policy"], "slurm");
    assert_eq!(json["slurm"]["time_limits"]["factor"], 3.0);
    assert_eq!(json["slurm"]["time_limits"]["priority_calc_period_s"], 600);
    assert!(table.contains("every 10.0 min"), "{table}");
    assert!(json["fair_share"].get("time_limits").is_none());
    assert_eq!(json["fair_share"]["kill_margin"], 0.25);
    assert!(json["slurm"].get("kill_margin").is_none());
    assert!(table.contains("kill margin (fair share)"), "{table}");
    // The input is described the same way under every policy.
    assert_eq!(
        json["slurm"]["demand_over_capacity"],
        json["fair_share"]["demand_over_capacity"]
    );

    // Bad SLURM settings are refused by name, and nothing is written.
    let refused = dir.path().join("refused.json");
    for (flag, value, says) in [
        (
            "--slurm-limit-factor",
            "0.5",
            "--slurm-limit-factor must be between 1 and 100",
        ),
        (
            "--slurm-half-life",
            "0s",
            "--slurm-half-life must be at least 1m",
        ),
        (
            "--slurm-calc-period",
            "soon",
            "--slurm-calc-period: `soon`: expected a number",
        ),
        (
            "--kill-margin",
            "2",
            "--kill-margin must be between 0 and 1",
        ),
        (
            "--kill-margin",
            "-0.1",
            "--kill-margin must be between 0 and 1",
        ),
    ] {
        let out = simulate(&[
            "--policy",
            "slurm",
            flag,
            value,
            "--out",
            refused.to_str().unwrap(),
        ]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{flag}: {stderr}");
        assert!(!refused.exists());
    }
    let out = simulate(&[
        "--policy",
        "all",
        "--timeline",
        dir.path().join("t.csv").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--timeline needs a single --policy (fair-share, priority or slurm)"));
}

#[test]
fn scenario_debug_per_day_sets_how_much_debug_work_the_month_holds() {
    let dir = tempfile::tempdir().unwrap();
    // Debug workloads (DESIGN §5: a minimum runtime of at most 15 min, at most 8 GPUs) in a
    // two-day scenario written with `more` flags.
    let debug_rows = |name: &str, more: &[&str]| {
        let out_dir = dir.path().join(name);
        let made = scenario(&out_dir, &[&["--days", "2"], more].concat());
        assert!(made.status.success(), "{made:?}");
        let trace = std::fs::read_to_string(out_dir.join("trace.csv")).unwrap();
        trace
            .lines()
            .skip(1)
            .filter(|row| {
                let f: Vec<&str> = row.split(',').collect();
                let (gpus, min_runtime): (u32, i64) =
                    (f[4].parse().unwrap(), f[6].parse().unwrap());
                gpus <= 8 && min_runtime > 0 && min_runtime <= 900
            })
            .count()
    };
    let preset = debug_rows("preset", &[]);
    let more = debug_rows("more", &["--debug-per-day", "3000"]);
    // Three times the preset's 1,000 a day (both follow the month's seasons).
    let ratio = more as f64 / preset as f64;
    assert!(
        (2.7..3.3).contains(&ratio),
        "preset {preset}, at 3,000 a day {more}"
    );

    let refused = dir.path().join("refused");
    let out = scenario(&refused, &["--debug-per-day", "lots"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--debug-per-day"), "{stderr}");
    assert!(!refused.exists(), "nothing is written");
}
