//! Simulated nodes: each a task speaking the real agent protocol over HTTP, with simulated GPUs.
//! A run of `sleep N` ends N seconds after it starts (exit 0); a run the server stops ends at once
//! (143, as after SIGTERM). Like the real agent, a node long-polls while it has nothing to report and
//! syncs at once when a run ends.

use super::Shared;
use crate::agent::protocol::{Finished, SyncRequest, SyncResponse};
use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

/// The longest a node holds a sync open (the real agent's default).
const POLL_S: u64 = 20;

/// Runs node `name` until the load test ends.
pub async fn run(name: String, token: String, gpus: u32, shared: Arc<Shared>) {
    let url = format!("{}/api/agent/v1/sync", shared.base);
    let mut running: BTreeMap<i64, Instant> = BTreeMap::new();
    let mut finished: Vec<Finished> = Vec::new();
    let mut last_answer = 0;
    while !shared.is_over() {
        let now = Instant::now();
        let ended: Vec<i64> = running
            .iter()
            .filter(|(_, ends)| **ends <= now)
            .map(|(id, _)| *id)
            .collect();
        for run_id in ended {
            running.remove(&run_id);
            finished.push(Finished {
                run_id,
                exit_code: Some(0),
                note: None,
                by_agent: false,
            });
        }
        // Hold the sync until the next run ends at most.
        let wait_s = if finished.is_empty() {
            running
                .values()
                .map(|ends| ends.saturating_duration_since(now).as_secs() + 1)
                .min()
                .unwrap_or(POLL_S)
                .min(POLL_S)
        } else {
            0
        };
        let request = SyncRequest {
            name: Some(name.clone()),
            cluster: None,
            gpus,
            gpu_model: "simulated".into(),
            healthy: true,
            running: running.keys().copied().collect(),
            finished: finished.clone(),
            last_answer,
            wait_s,
            ..SyncRequest::default()
        };
        let began = Instant::now();
        let sent = shared
            .http
            .post(&url)
            .bearer_auth(&token)
            .json(&request)
            .timeout(Duration::from_secs(wait_s + 60))
            .send()
            .await;
        let answer = match sent {
            Ok(response) if response.status().is_success() => response
                .json::<SyncResponse>()
                .await
                .map_err(|e| e.to_string()),
            Ok(response) => Err(format!("answered {}", response.status())),
            Err(error) => Err(error.to_string()),
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                shared.errors.record(format!("{name}'s sync: {error}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // A sync's latency is its duration less the time the server held it waiting for work.
        let took = began.elapsed();
        shared.syncs.push(
            shared.window.phase(),
            took.saturating_sub(Duration::from_millis(answer.held_ms)),
        );
        finished.clear();
        if answer.answer > 0 {
            last_answer = answer.answer;
        }
        let started = Instant::now();
        for assignment in answer.start {
            let seconds = simulated_seconds(&assignment.command);
            running.insert(assignment.run_id, started + Duration::from_secs(seconds));
            shared.started(assignment.workload_id, &assignment.name);
        }
        for run_id in answer.stop {
            if running.remove(&run_id).is_some() {
                finished.push(Finished {
                    run_id,
                    exit_code: Some(143),
                    note: Some("stopped: SIGTERM".into()),
                    by_agent: false,
                });
            }
        }
    }
}

/// How long a simulated run lasts: `sleep N` lasts N seconds; anything else a minute.
pub fn simulated_seconds(command: &str) -> u64 {
    command
        .strip_prefix("sleep ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(60)
}

#[cfg(test)]
mod tests {
    use super::simulated_seconds;

    #[test]
    fn a_sleep_lasts_its_seconds_and_anything_else_a_minute() {
        assert_eq!(simulated_seconds("sleep 300"), 300);
        assert_eq!(simulated_seconds("python train.py"), 60);
    }
}
