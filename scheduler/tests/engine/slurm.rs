//! The SLURM peer (multifactor priority with Fair Tree, scavenger QOS, EASY backfill), behind the
//! same interface as the other policies.

use scheduler::*;

use crate::support::{preempted, starts, World};

fn slurm(shares: &[(&str, f64)], nodes: usize, gpus: u32) -> World {
    World::with_config(
        shares,
        nodes,
        gpus,
        Config {
            policy: Policy::Slurm,
            ..Config::default()
        },
    )
}

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

/// A normal-QOS job (an hour's minimum runtime, so not debug) with a time limit.
fn job(w: &mut World, path: &str, gpus: u32, limit: Time) -> WorkloadSpec {
    let mut spec = w.spec(path, gpus, HOUR);
    spec.time_limit = Some(limit);
    spec
}

fn started(decision: &Decision) -> Vec<WorkloadId> {
    starts(decision).iter().map(|s| s.0).collect()
}

#[test]
fn a_short_job_backfills_before_the_reservation_and_a_long_one_waits() {
    let mut w = slurm(TWO_TEAMS, 1, 8);
    let running = job(&mut w, "a", 6, 2 * HOUR);
    let running = w.place(running, 0, &[(0, &[0, 1, 2, 3, 4, 5])]);
    w.running[0].baseline_protected = true;
    w.now = 10 * 60;
    // The oldest and largest job goes first; it cannot start until the running job's limit.
    w.now -= 60;
    let big = job(&mut w, "b", 8, 4 * HOUR);
    let big = w.submit_spec(big);
    w.now += 60;
    let long = job(&mut w, "b", 2, 3 * HOUR);
    let long = w.submit_spec(long);
    let short = job(&mut w, "b", 2, HOUR);
    let short = w.submit_spec(short);
    let decision = w.decide();
    assert_eq!(started(&decision), [short]);
    assert!(preempted(&decision).is_empty());
    let e = w.explain(big);
    assert_eq!(e.position, 1);
    assert_eq!(w.explain(long).position, 2);
    let _ = running;
}

#[test]
fn without_a_blocked_job_ahead_everything_that_fits_starts_in_priority_order() {
    let mut w = slurm(TWO_TEAMS, 1, 4);
    let first = job(&mut w, "a", 2, HOUR);
    let first = w.submit_spec(first);
    let second = job(&mut w, "b", 2, 10 * DAY);
    let second = w.submit_spec(second);
    let third = job(&mut w, "a", 1, HOUR);
    let third = w.submit_spec(third);
    assert_eq!(started(&w.decide()).len(), 2);
    assert!(started(&w.decide()).contains(&first));
    assert!(started(&w.decide()).contains(&second) || started(&w.decide()).contains(&third));
}

#[test]
fn scavenger_work_is_preempted_and_requeued_for_any_other_job() {
    let mut w = slurm(TWO_TEAMS, 1, 4);
    let sweep = w.running("a", 0, 0, 0, &[0, 1, 2, 3]);
    w.now = 60;
    let normal = job(&mut w, "b", 4, HOUR);
    let normal = w.submit_spec(normal);
    let decision = w.step();
    assert_eq!(preempted(&decision), [sweep]);
    assert_eq!(started(&decision), [normal]);
    let reason = decision
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Preempt { reason, then, .. } => Some((reason.rule, *then)),
            _ => None,
        })
        .unwrap();
    assert_eq!(reason, (PreemptRule::FreeWork, AfterStop::Requeue));
    assert!(w.queued.iter().any(|q| q.id == sweep));
}

#[test]
fn running_normal_jobs_are_never_preempted_however_over_served_their_team() {
    let mut w = slurm(TWO_TEAMS, 1, 4);
    w.history("a", 5_000.0);
    let hog = w.running("a", HOUR, -10 * DAY, 0, &[0, 1, 2, 3]);
    w.running[0].baseline_protected = true;
    let starved = job(&mut w, "b", 4, HOUR);
    let starved = w.submit_spec(starved);
    let decision = w.decide();
    assert!(decision.actions.is_empty(), "{:?}", decision.actions);
    assert!(w.explain(starved).position == 1);
    let _ = hog;
}

#[test]
fn the_team_with_less_decayed_usage_per_share_goes_first() {
    let mut w = slurm(TWO_TEAMS, 1, 2);
    w.history("a", 100.0);
    let from_a = job(&mut w, "a", 2, HOUR);
    let from_a = w.submit_spec(from_a);
    let from_b = job(&mut w, "b", 2, HOUR);
    let from_b = w.submit_spec(from_b);
    assert_eq!(started(&w.decide()), [from_b]);
    assert_eq!(w.explain(from_a).position, 2);
}

#[test]
fn debug_work_goes_ahead_of_older_normal_work() {
    let mut w = slurm(TWO_TEAMS, 1, 2);
    w.history("b", 100.0);
    let normal = job(&mut w, "a", 2, HOUR);
    let normal = w.submit_spec(normal);
    w.now = 3 * HOUR;
    let mut debug = w.spec("b", 2, 10 * 60);
    debug.time_limit = Some(20 * 60);
    let debug = w.submit_spec(debug);
    assert_eq!(started(&w.decide()), [debug]);
    assert_eq!(w.explain(normal).position, 2);
}

#[test]
fn decayed_usage_halves_every_half_life() {
    let tree = BudgetTree::from_paths([("a", 1.0)]).unwrap();
    let a = tree.leaf("a").unwrap();
    let mut engine = Engine::new(tree, Config::default());
    engine.ledger_mut().charge(a, 0, HOUR, 3_600.0);
    let half_life = Config::default().ledger.decay_half_life;
    // An hour's charge, a half-life after it ended: a little under half (its first minutes are
    // older than a half-life).
    let later = engine.ledger().decayed_usage(a, HOUR + half_life);
    assert!(later > 1_790.0 && later < 1_800.0, "{later}");
    // Unlike the window's usage, it is not forgotten after the window.
    assert!(engine.ledger().decayed_usage(a, HOUR + 3 * half_life) > 400.0);
    assert!(engine.ledger().usage(a, HOUR + 3 * half_life) < 1.0);
}

#[test]
fn a_gang_over_small_hosts_starts_though_a_smaller_job_that_needs_one_large_host_could_not() {
    // Three 1-GPU hosts busy with scavenger work, and the one 2-GPU host cordoned. A 2-GPU job
    // fits on one host only (the largest is 2 GPUs) and finds none; a 3-GPU job is a gang over
    // whole hosts, and the three small ones are its for the preempting.
    let mut w = slurm(TWO_TEAMS, 3, 1);
    w.nodes.push(NodeState {
        gpus: 2,
        health: Health::Cordoned,
    });
    let sweeps: Vec<WorkloadId> = (0..3).map(|n| w.running("a", 0, 0, n, &[0])).collect();
    w.now = 60;
    // A week older: its age outweighs the larger job's size.
    let mut single = job(&mut w, "b", 2, HOUR);
    single.submitted_at = -7 * DAY;
    let single = w.submit_spec(single);
    let gang = job(&mut w, "b", 3, HOUR);
    let gang = w.submit_spec(gang);
    assert_eq!(w.explain(single).position, 1, "the older job is ahead");
    let decision = w.decide();
    assert_eq!(started(&decision), [gang]);
    let mut preempted = preempted(&decision);
    preempted.sort();
    assert_eq!(preempted, sweeps);
}
