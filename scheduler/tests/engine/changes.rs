//! A driver that names what it changed between passes ([`Engine::decide_after`]) gets the
//! decisions of one that hands over whole snapshots, under every policy.

use scheduler::*;

use crate::support::World;

const TEAMS: &[(&str, f64)] = &[
    ("ai", 3.0),
    ("ai/olmo", 2.0),
    ("ai/tulu", 1.0),
    ("vision", 1.0),
    ("vision/molmo", 1.0),
];
const LEAVES: [&str; 3] = ["ai/olmo", "ai/tulu", "vision/molmo"];

/// The indices of `now` whose entry differs from `before`'s at the same index.
fn touched<T: PartialEq>(before: &[T], now: &[T]) -> Vec<u32> {
    (0..now.len().min(before.len()))
        .filter(|&i| before[i] != now[i])
        .map(|i| i as u32)
        .collect()
}

/// A deterministic stream of small numbers (no dependency for a test's dice).
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % sides
    }
}

/// A driver that asks both ways at each pass and checks that the answers agree.
#[derive(Default)]
struct Driver {
    /// The snapshot the previous pass was given.
    running: Vec<RunningWorkload>,
    queued: Vec<WorkloadSpec>,
}

impl Driver {
    fn pass(&mut self, w: &mut World, pass: u64, policy: Policy) -> Decision {
        let whole = w.decide();
        let changes = Changes {
            pass,
            running: &touched(&self.running, &w.running),
            queued: &touched(&self.queued, &w.queued),
        };
        let after = w
            .engine
            .decide_after(&w.state(), w.now, &changes)
            .expect("valid snapshot");
        assert_eq!(after, whole, "{policy:?}, pass {pass}");
        // The changes of the next pass are counted from the snapshot this one was given.
        self.running.clone_from(&w.running);
        self.queued.clone_from(&w.queued);
        whole
    }
}

#[test]
fn a_driver_naming_its_changes_gets_the_decisions_of_whole_snapshots() {
    for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
        let config = Config {
            policy,
            ..Config::default()
        };
        let mut w = World::with_config(TEAMS, 6, 8, config);
        let mut dice = Dice(7);
        let mut driver = Driver::default();
        let mut kept_passes = 0;
        for pass in 0..400u64 {
            // Every few passes the driver asks something else in between, or skips a count:
            // the engine must notice and build afresh.
            let pass = if pass % 97 == 50 { pass + 1_000 } else { pass };
            for _ in 0..dice.roll(4) {
                let path = LEAVES[dice.roll(3) as usize];
                let gpus = [1, 1, 2, 4, 8, 16][dice.roll(6) as usize];
                let min_runtime = [0, 0, 600, 3_600][dice.roll(4) as usize];
                let mut spec = w.spec(path, gpus, min_runtime);
                spec.resumable = dice.roll(3) > 0;
                spec.time_limit = Some(1_800 + 600 * dice.roll(12) as Time);
                w.remaining
                    .insert(spec.id, 300 + 300 * dice.roll(20) as Time);
                w.submit_spec(spec);
            }
            if dice.roll(7) == 0 && !w.queued.is_empty() {
                // Someone changes a waiting workload's priority in place.
                let q = dice.roll(w.queued.len() as u64) as usize;
                w.queued[q].priority = dice.roll(3) as i32 - 1;
            }
            if dice.roll(5) == 0 {
                // A host goes down for a while, or comes back.
                let node = dice.roll(6) as usize;
                w.nodes[node].health = match w.nodes[node].health {
                    Health::Healthy => Health::Down,
                    _ => Health::Healthy,
                };
            }
            let whole = driver.pass(&mut w, pass, policy);
            kept_passes += usize::from(!whole.actions.is_empty());
            if pass % 11 == 5 {
                // A driver that could not apply the decision (the server's transaction failed)
                // asks again about the same snapshot.
                continue;
            }
            w.apply(&whole);
            let next = w.now + 60 * (1 + dice.roll(10) as Time);
            w.advance_to(next);
        }
        assert!(
            kept_passes > 100,
            "{policy:?}: {kept_passes} passes decided something"
        );
    }
}

#[test]
fn a_flood_of_small_work_starts_as_from_whole_snapshots_when_a_cluster_wide_run_ends() {
    for policy in [Policy::FairShare, Policy::Priority, Policy::Slurm] {
        let config = Config {
            policy,
            ..Config::default()
        };
        let mut w = World::with_config(TEAMS, 6, 8, config);
        let mut driver = Driver::default();
        let gang = w.spec("vision/molmo", 48, 3_600);
        w.remaining.insert(gang.id, 600);
        w.submit_spec(gang);
        let first = driver.pass(&mut w, 0, policy);
        w.apply(&first);
        // More one-GPU sweeps of one team than a pass draws from the queue at a time.
        for _ in 0..40 {
            let spec = w.spec("ai/tulu", 1, 0);
            w.remaining.insert(spec.id, 3_600);
            w.submit_spec(spec);
        }
        w.advance_to(60);
        let waiting = driver.pass(&mut w, 1, policy);
        w.apply(&waiting);
        w.advance_to(700);
        let flood = driver.pass(&mut w, 2, policy);
        let starts = flood
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Start { .. }))
            .count();
        assert_eq!(
            starts, 40,
            "{policy:?}: every sweep starts once the run ends"
        );
    }
}
