//! What a sync answers, from the node's runs and the agent's report: pure, so the exactly-once
//! rules are tested without a server.
//!
//! - A run the agent reports alive but the server no longer runs is stopped.
//! - A run the server runs but the agent does not report is handed out only if the answer that
//!   carried it never reached the agent (`sent_answer > last_answer`, or never sent); if the
//!   agent acted on that answer and still does not report the run, the agent lost it (`lost`).
//! - A stopped run's GPUs stay busy until the agent no longer reports it alive (`release`); a new
//!   run on any of those GPUs waits until then.

use std::collections::BTreeSet;

/// A run on the node that is open, or ended but not yet known to be gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRun {
    pub run_id: i64,
    pub gpus: Vec<u32>,
    /// The answer that last carried it to the agent.
    pub sent_answer: Option<i64>,
    /// Open, and its workload is running: the agent should run it.
    pub live: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub start: Vec<i64>,
    pub stop: Vec<i64>,
    /// Ended runs the agent no longer reports: their GPUs are free for new runs.
    pub release: Vec<i64>,
    /// Live runs the agent acted on but does not report.
    pub lost: Vec<i64>,
    /// Runs that wait for GPUs still held by stopping runs.
    pub held: Vec<i64>,
}

pub fn plan(runs: &[NodeRun], running: &BTreeSet<i64>, last_answer: i64) -> Plan {
    let mut plan = Plan::default();
    let mut busy: BTreeSet<u32> = BTreeSet::new();
    let mut candidates = Vec::new();
    let known: BTreeSet<i64> = runs.iter().map(|r| r.run_id).collect();
    for run in runs {
        let alive = running.contains(&run.run_id);
        match (run.live, alive) {
            (true, true) => {}
            (true, false) => match run.sent_answer {
                Some(answer) if answer <= last_answer => plan.lost.push(run.run_id),
                _ => candidates.push(run),
            },
            (false, true) => {
                plan.stop.push(run.run_id);
                busy.extend(&run.gpus);
            }
            (false, false) => {
                if run.sent_answer.is_some() {
                    plan.release.push(run.run_id);
                }
            }
        }
    }
    // Reported runs the server has no open record of at all: stop them too.
    plan.stop
        .extend(running.iter().copied().filter(|id| !known.contains(id)));
    plan.stop.sort_unstable();
    for run in candidates {
        if run.gpus.iter().any(|g| busy.contains(g)) {
            plan.held.push(run.run_id);
        } else {
            plan.start.push(run.run_id);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run_id: i64, gpus: &[u32], sent_answer: Option<i64>, live: bool) -> NodeRun {
        NodeRun {
            run_id,
            gpus: gpus.to_vec(),
            sent_answer,
            live,
        }
    }

    fn set(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_new_run_is_handed_out_and_a_reported_one_is_not() {
        let runs = [run(1, &[0], Some(3), true), run(2, &[1], None, true)];
        let plan = plan(&runs, &set(&[1]), 3);
        assert_eq!(plan.start, vec![2]);
        assert!(plan.stop.is_empty() && plan.lost.is_empty());
    }

    #[test]
    fn a_restarted_agent_that_re_adopted_its_runs_is_sent_nothing_again() {
        let runs = [run(1, &[0], Some(3), true), run(2, &[1], Some(3), true)];
        let plan = plan(&runs, &set(&[1, 2]), 3);
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn a_run_whose_answer_never_arrived_is_sent_again() {
        let runs = [run(5, &[0, 1], Some(4), true)];
        assert_eq!(plan(&runs, &set(&[]), 3).start, vec![5]);
    }

    #[test]
    fn a_run_the_agent_acted_on_but_no_longer_reports_is_lost_not_resent() {
        let runs = [run(5, &[0], Some(4), true)];
        let plan = plan(&runs, &set(&[]), 4);
        assert_eq!(plan.lost, vec![5]);
        assert!(plan.start.is_empty());
    }

    #[test]
    fn gpus_of_a_stopping_run_are_handed_out_only_after_it_is_gone() {
        let runs = [run(1, &[0, 1], Some(2), false), run(2, &[1, 2], None, true)];
        let stopping = plan(&runs, &set(&[1]), 2);
        assert_eq!(stopping.stop, vec![1]);
        assert_eq!(stopping.held, vec![2]);
        assert!(stopping.start.is_empty());

        let gone = plan(&runs, &set(&[]), 2);
        assert_eq!(gone.release, vec![1]);
        assert_eq!(gone.start, vec![2]);
    }

    #[test]
    fn runs_the_server_does_not_know_are_stopped() {
        let plan = plan(&[], &set(&[9]), 0);
        assert_eq!(plan.stop, vec![9]);
    }
}
