//! The agent API's messages (`/api/agent/v1`), shared by the server and the agent.

use serde::{Deserialize, Serialize};

/// `POST /api/agent/v1/sync`: the agent's heartbeat and report; the answer says what to start and
/// stop. An agent that reconnects simply reports what it still runs and is told the difference.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncRequest {
    /// The node name the agent believes it is (checked against the token's node).
    #[serde(default)]
    pub name: Option<String>,
    pub gpus: u32,
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default = "yes")]
    pub healthy: bool,
    /// Runs whose processes are alive.
    #[serde(default)]
    pub running: Vec<i64>,
    #[serde(default)]
    pub finished: Vec<Finished>,
    /// Output tails of running runs that changed since the last sync.
    #[serde(default)]
    pub logs: Vec<LogTail>,
    /// Hold the answer up to this many seconds while there is nothing to do (long poll).
    #[serde(default)]
    pub wait_s: u64,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finished {
    pub run_id: i64,
    pub exit_code: i32,
    #[serde(default)]
    pub log_tail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogTail {
    pub run_id: i64,
    pub tail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncResponse {
    pub node: String,
    pub start: Vec<Assignment>,
    pub stop: Vec<i64>,
    /// Seconds between SIGTERM and SIGKILL.
    pub grace_s: i64,
    /// Sync at least this often.
    pub heartbeat_s: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Assignment {
    pub run_id: i64,
    pub workload_id: i64,
    pub name: String,
    pub command: String,
    pub gpu_indices: Vec<u32>,
    /// A previous run of this workload existed (`HOURGLASS_RESUMED=1`).
    pub resumed: bool,
}
