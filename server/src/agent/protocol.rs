//! The agent API's messages (`/api/agent/v1`), shared by the server and the agent.
//!
//! Every run starts exactly once. The server numbers the answers that hand out runs; the agent
//! persists what it starts before it says so, and reports in every sync the last answer it acted
//! on (`last_answer`), the runs whose processes are alive (`running`) and the runs whose processes
//! are all gone (`finished`). A run is handed out again only when its answer never reached the
//! agent, and its GPUs go to a new run only once the node has said the previous run is gone.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The largest sync body the server accepts. The agent keeps well below it: output travels in
/// chunks of at most [`CHUNK_BYTES`], at most [`SYNC_OUTPUT_BYTES`] per sync.
pub const SYNC_BODY_LIMIT: usize = 4 << 20;
pub const CHUNK_BYTES: usize = 256 << 10;
pub const SYNC_OUTPUT_BYTES: usize = 1 << 20;
/// A health reason is one line; longer ones are cut.
pub const REASON_CHARS: usize = 300;

/// `POST /api/agent/v1/sync`: the agent's heartbeat and report; the answer says what to start and
/// stop.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SyncRequest {
    /// The node name the agent believes it is (checked against the token's node).
    #[serde(default)]
    pub name: Option<String>,
    /// The cluster the agent was told its node is in (checked against the token's node).
    #[serde(default)]
    pub cluster: Option<String>,
    pub gpus: u32,
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default = "yes")]
    pub healthy: bool,
    /// Why the node is unhealthy (the failed check's first line).
    #[serde(default)]
    pub health_reason: Option<String>,
    /// Runs the agent holds and has not reported ended: with a live process (including those
    /// being stopped), or ended with output still on its way.
    #[serde(default)]
    pub running: Vec<i64>,
    /// Runs whose processes are all gone, until the server has acknowledged them.
    #[serde(default)]
    pub finished: Vec<Finished>,
    /// New output of runs, in order, each chunk at its byte offset in the run's output.
    #[serde(default)]
    pub output: Vec<OutputChunk>,
    /// The highest answer number whose runs this agent has recorded (0: none yet).
    #[serde(default)]
    pub last_answer: i64,
    /// Hold the answer up to this many seconds while there is nothing to do (long poll).
    #[serde(default)]
    pub wait_s: u64,
    /// GPU samples (`nvidia-smi`) taken since the last answered sync, oldest first; the server
    /// attributes each to the run holding that GPU at that moment.
    #[serde(default)]
    pub samples: Vec<GpuSample>,
}

/// One GPU's state at one moment, as `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,
/// memory.total,power.draw` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Epoch seconds on the node's clock.
    pub at: i64,
    pub gpu: u32,
    /// Percent of the time a kernel ran, 0–100.
    pub utilization: f64,
    pub memory_used_mib: f64,
    pub memory_total_mib: f64,
    /// Watts; `None` where the GPU does not report it.
    #[serde(default)]
    pub power_w: Option<f64>,
    /// Seconds this sample stands for (the sampling interval).
    pub every_s: u32,
}

/// The most samples one sync carries (the rest wait for the next).
pub const SYNC_SAMPLES: usize = 2_048;

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub run_id: i64,
    /// The command's exit status (128 + signal when a signal ended it); `None` when the agent
    /// could not learn it (the run ended while no agent was watching and left no status).
    pub exit_code: Option<i32>,
    /// What the agent knows beyond the code, e.g. "stopped: SIGKILL after the 10 s grace period".
    #[serde(default)]
    pub note: Option<String>,
    /// The agent stopped the run on its own (it shut down, or lost the server past the
    /// deadline), not because the command ended or the server asked: not the job's failure.
    #[serde(default)]
    pub by_agent: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    pub run_id: i64,
    /// Byte offset of `data`'s first byte in the run's output stream.
    pub offset: u64,
    /// Bytes in the stream this chunk covers (`data` may differ where bytes were not UTF-8).
    pub len: u64,
    pub data: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncResponse {
    pub node: String,
    /// Names this node's registration in this server's database: an agent whose state directory
    /// holds another key (another database, a node registered anew) drops that state first.
    #[serde(default)]
    pub node_key: String,
    /// The number of this answer when it hands out runs (else 0); the agent reports it back as
    /// `last_answer` once it has recorded them.
    #[serde(default)]
    pub answer: i64,
    pub start: Vec<Assignment>,
    pub stop: Vec<i64>,
    /// Seconds between SIGTERM and SIGKILL.
    pub grace_s: i64,
    /// Sync at least this often.
    pub heartbeat_s: i64,
    /// The server marks a silent node down (and requeues its work) after this many seconds; an
    /// agent cut off that long stops its runs, since they are already being run elsewhere.
    #[serde(default)]
    pub down_after_s: i64,
    /// Output received so far, per reported run: the agent resumes from these offsets.
    #[serde(default)]
    pub output_received: BTreeMap<i64, u64>,
    /// How long the server held this sync waiting for work before answering (0: at once).
    #[serde(default)]
    pub held_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub run_id: i64,
    pub workload_id: i64,
    pub name: String,
    pub command: String,
    pub gpu_indices: Vec<u32>,
    /// A previous run of this workload existed (`HOURGLASS_RESUMED=1`).
    pub resumed: bool,
}
