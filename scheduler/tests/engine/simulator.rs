//! The simulator (DESIGN §5–§6): determinism, progress on preemption, outages, both policies.

use scheduler::sim::family;
use scheduler::sim::scenario::{generate, ScenarioConfig};
use scheduler::sim::{self, InputFile, SimConfig, SimInput, TRACE_HEADER};
use scheduler::Policy;

/// A reference-shaped scenario, shrunk so debug tests stay fast: 16 hosts, 2 days.
pub fn small_reference(seed: u64) -> SimInput {
    let mut config = ScenarioConfig::reference(seed, 2);
    config.hosts = vec![8; 16];
    let s = generate(&config);
    SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).expect("generated inputs parse")
}

fn input(cluster: &str, rows: &[&str]) -> SimInput {
    let trace = format!("{TRACE_HEADER}\n{}\n", rows.join("\n"));
    SimInput::parse("[shares]\na = 1\nb = 1\n", cluster, &trace).expect("valid input")
}

const ONE_HOST: &str = "[[nodes]]\ncount = 1\ngpus_per_node = 2\n";

fn config(horizon: i64) -> SimConfig {
    SimConfig {
        horizon: Some(horizon),
        ..SimConfig::default()
    }
}

fn rows(input: &SimInput, out: &sim::SimOutput) -> Vec<String> {
    sim::timeline_csv(input, &out.segments)
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_same_inputs_give_byte_identical_reports_and_timelines() {
    let input = small_reference(11);
    for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
        let config = SimConfig {
            policy,
            ..SimConfig::default()
        };
        let (first, second) = (sim::run(&input, &config), sim::run(&input, &config));
        assert_eq!(first.report.to_json(), second.report.to_json());
        assert_eq!(
            sim::timeline_csv(&input, &first.segments),
            sim::timeline_csv(&input, &second.segments)
        );
        // A run that means something: hundreds of workloads, some preempted.
        assert!(first.report.workloads.submitted > 300);
        assert!(first.report.preemptions > 0);
    }
    // The generator is a pure function of its seed.
    let config = ScenarioConfig::reference(5, 1);
    assert_eq!(generate(&config), generate(&config));
    assert_ne!(
        generate(&config).trace_csv,
        generate(&ScenarioConfig::reference(6, 1)).trace_csv
    );
}

#[test]
fn preempted_resumable_work_keeps_its_progress() {
    let input = input(
        ONE_HOST,
        &["sweep,0,b,,2,1000,0,true,0", "train,100,a,,2,500,60,true,0"],
    );
    let out = sim::run(&input, &config(2_000));
    assert_eq!(
        rows(&input, &out),
        [
            "sweep,b,node-000,0;1,0,100,false,,preempted",
            "train,a,node-000,0;1,100,600,true,160,completed",
            "sweep,b,node-000,0;1,600,1500,false,,completed",
        ]
    );
    let r = &out.report;
    assert_eq!((r.workloads.completed, r.workloads.killed), (2, 0));
    assert_eq!(r.preemptions_by_reason.get("free-work"), Some(&1));
    assert_eq!(r.requeue_wait_s.p50, Some(500));
}

#[test]
fn preempted_non_resumable_work_is_lost() {
    let input = input(
        ONE_HOST,
        &[
            "sweep,0,b,,2,1000,0,false,0",
            "train,100,a,,2,500,60,true,0",
        ],
    );
    let out = sim::run(&input, &config(2_000));
    let r = &out.report;
    assert_eq!((r.workloads.completed, r.workloads.killed), (1, 1));
    assert_eq!(
        rows(&input, &out)[0],
        "sweep,b,node-000,0;1,0,100,false,,killed"
    );
    assert!((r.lost_gpu_h - 200.0 / 3_600.0).abs() < 1e-6);
    let lost = r.lost_to_preemption;
    assert_eq!((lost.allocated_gpu_h, lost.free_gpu_h), (0.0, r.lost_gpu_h));
}

#[test]
fn lost_to_preemption_counts_allocated_work_apart_and_leaves_out_hosts_going_down() {
    // a's non-resumable training has run 400,000 s on both GPUs, a third more than its share of
    // the week, when b, which has used nothing, asks for them: past the kill margin, fair share
    // stops it and its progress is lost.
    let preempted = input(
        ONE_HOST,
        &[
            "hog,0,a,,2,1000000,60,false,0",
            "late,400000,b,,2,500,60,true,0",
        ],
    );
    let r = sim::run(&preempted, &config(450_000)).report;
    assert_eq!(r.preemptions_by_reason.get("fair-share"), Some(&1));
    let lost = r.lost_to_preemption;
    assert!((lost.allocated_gpu_h - 800_000.0 / 3_600.0).abs() < 1e-6);
    assert_eq!(lost.free_gpu_h, 0.0);
    assert_eq!(lost.allocated_gpu_h, r.lost_gpu_h);
    assert!(lost.allocated_fraction > 0.0);
    // The same work on a host that goes down is lost too, but not to preemption.
    let cluster = format!(
        "{ONE_HOST}\n[[outages]]\nnode = \"node-000\"\nfrom_s = 100\nto_s = 400\nstate = \"down\"\n"
    );
    let down = input(&cluster, &["hog,0,a,,2,5000,60,false,0"]);
    let r = sim::run(&down, &config(3_000)).report;
    assert!((r.lost_gpu_h - 200.0 / 3_600.0).abs() < 1e-6);
    assert_eq!(r.lost_to_preemption, Default::default());
}

#[test]
fn a_host_going_down_requeues_its_work_and_leaves_the_capacity() {
    let cluster = format!(
        "{ONE_HOST}\n[[nodes]]\ncount = 1\ngpus_per_node = 2\nname_prefix = \"spare-\"\n\n\
         [[outages]]\nnode = \"node-000\"\nfrom_s = 100\nto_s = 400\nstate = \"down\"\n"
    );
    let input = input(
        &cluster,
        &[
            "long,0,a,,2,1000,600,true,0",
            "other,0,b,,2,1000,600,true,0",
        ],
    );
    let out = sim::run(&input, &config(3_000));
    let r = &out.report;
    assert_eq!(r.preemptions_by_reason.get("host-down"), Some(&1));
    assert_eq!(r.workloads.completed, 2);
    // Healthy: 4 GPUs for 3000 s less 2 for 300 s. Busy there: the drained run (0–100), the
    // spare's run (0–1000), the resumed run back on its host (400–1300), 2 GPUs each.
    assert_eq!(r.occupancy, ((4_000.0 / 11_400.0) * 1e6_f64).round() / 1e6);
    assert!(out
        .segments
        .iter()
        .any(|s| s.end == 100 && s.end_kind == sim::SegmentEnd::Drained));
}

#[test]
fn both_policies_run_on_one_input_and_report_side_by_side() {
    let input = small_reference(3);
    let fair = sim::run(&input, &SimConfig::default());
    let baseline = sim::run(
        &input,
        &SimConfig {
            policy: Policy::Priority,
            ..SimConfig::default()
        },
    );
    let json: serde_json::Value =
        serde_json::from_str(&sim::both_json(&fair.report, &baseline.report)).unwrap();
    assert_eq!(json["fair_share"]["policy"], "fair-share");
    assert_eq!(json["priority"]["policy"], "priority");
    for key in [
        "policy",
        "horizon_s",
        "gpus",
        "wall_s",
        "workloads",
        "occupancy",
        "unallocated_fraction",
        "preemptions",
        "wait_s",
        "delivered_over_owed",
        "nodes",
    ] {
        assert!(json["priority"].get(key).is_some(), "missing {key}");
    }
    let table = sim::summary_table(&[&fair.report, &baseline.report]);
    assert!(table.lines().next().unwrap().contains("fair-share"));
    assert!(table.lines().next().unwrap().contains("priority"));
}

#[test]
fn a_workload_larger_than_the_cluster_is_rejected_with_its_line() {
    let trace = format!("{TRACE_HEADER}\nw1,0,a,,1,10,0,true,0\nw2,0,a,,3,10,0,true,0\n");
    let err = SimInput::parse("[shares]\na = 1\n", ONE_HOST, &trace).unwrap_err();
    assert_eq!(err.file, InputFile::Trace);
    assert_eq!(
        (err.error.line, err.error.field.as_deref()),
        (Some(3), Some("gpus"))
    );
}

#[test]
fn the_demo_sized_scenario_runs_on_the_callers_leaves() {
    let leaves = [
        "lang/pretrain",
        "lang/eval",
        "lang/posttrain",
        "vision/seg",
        "vision/video",
        "science/bio",
        "science/climate",
    ];
    let s = generate(&ScenarioConfig::small(2, 3, &leaves));
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).unwrap();
    assert_eq!(input.cluster.total_gpus(), 28);
    assert_eq!(input.tree.leaves().count(), 7);
    let out = sim::run(&input, &SimConfig::default());
    assert!(out.report.workloads.completed > 0);
    assert!(out.segments.iter().all(|s| s.start <= s.end));
}

/// First start of every trace row under this run, or `None`.
fn first_starts(input: &SimInput, out: &sim::SimOutput) -> Vec<Option<i64>> {
    let mut first = vec![None::<i64>; input.trace.len()];
    for seg in &out.segments {
        let f = &mut first[seg.row as usize];
        *f = Some(f.map_or(seg.start, |x| x.min(seg.start)));
    }
    first
}

#[test]
fn on_several_seeds_of_the_family_fair_share_starts_debug_work_within_a_minute_and_keeps_its_other_promises(
) {
    for seed in [1, 2, 3] {
        let member = &family::members(seed, 10, None).expect("valid")[0];
        assert_eq!(member.name, "reference");
        let s = &member.scenario;
        let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).expect("valid");
        let out = sim::run(&input, &SimConfig::default());
        let r = &out.report;
        let debug = &r.wait_s.debug;
        assert!(debug.count > 3_000, "seed {seed}: {debug:?}");
        assert!(
            debug.p90.expect("debug work") <= 60,
            "seed {seed}: {debug:?}"
        );
        let owed = &r.delivered_over_owed;
        assert!(owed.overall.expect("owed") >= 0.98, "seed {seed}: {owed:?}");
        assert!(owed.min.expect("owed") >= 0.95, "seed {seed}: {owed:?}");
        assert!(
            r.occupancy >= r.occupancy_limit - 0.01,
            "seed {seed}: occupancy {} against a limit of {}",
            r.occupancy,
            r.occupancy_limit
        );
        assert_eq!(r.zero_length_runs, 0, "seed {seed}");
        // No gang starves: every multi-host workload that says high priority (so nothing of its
        // own leaf goes ahead of it for long: lower-priority gangs wait for their own team's
        // work, by the team's choice) submitted in the first two thirds of the horizon has
        // started by its end.
        let node = input.cluster.node_size();
        let first = first_starts(&input, &out);
        let starved: Vec<&str> = input
            .trace
            .iter()
            .zip(&first)
            .filter(|(row, start)| {
                row.gpus > node
                    && row.priority == 2
                    && row.submit < 2 * r.horizon_s / 3
                    && start.is_none()
            })
            .map(|(row, _)| row.id.as_str())
            .collect();
        assert!(
            starved.is_empty(),
            "seed {seed}: never started: {starved:?}"
        );
    }
}

#[test]
fn demand_over_capacity_and_the_occupancy_limit_describe_the_input_not_the_policy() {
    let member = &family::members(4, 3, None).expect("valid")[1];
    let s = &member.scenario;
    let input = SimInput::parse(&s.tree_toml, &s.cluster_toml, &s.trace_csv).expect("valid");
    let run = |policy| {
        sim::run(
            &input,
            &SimConfig {
                policy,
                ..SimConfig::default()
            },
        )
        .report
    };
    let (fair, baseline) = (run(Policy::FairShare), run(Policy::Priority));
    assert_eq!(fair.demand_over_capacity, baseline.demand_over_capacity);
    assert_eq!(fair.occupancy_limit, baseline.occupancy_limit);
    assert_eq!(fair.occupancy_rigid, baseline.occupancy_rigid);
    assert!(fair.occupancy_rigid <= fair.occupancy_limit + 1e-9);
    assert!(
        fair.demand_over_capacity > 2.0,
        "{}",
        fair.demand_over_capacity
    );
    assert!(fair.occupancy <= fair.occupancy_limit + 1e-9);
    assert!(baseline.occupancy <= baseline.occupancy_limit + 1e-9);
}
