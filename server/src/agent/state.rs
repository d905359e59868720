//! The agent's state directory: what it runs, persisted before it is reported, so an agent that
//! restarts (or was killed) re-adopts its runs instead of starting them again.
//!
//! ```text
//! <dir>/lock          held (flock) while an agent uses the directory
//! <dir>/state.json    AgentState, replaced atomically (write + rename)
//! <dir>/runs/<id>.out the run's output (stdout and stderr); survives the agent
//! <dir>/runs/<id>.exit the command's exit status, written by the run's wrapper shell
//! ```

use super::protocol::Finished;
use crate::ServerError;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::{
    collections::BTreeMap,
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// The node registration these runs belong to (see `SyncResponse::node_key`).
    #[serde(default)]
    pub node_key: Option<String>,
    /// The highest answer whose runs are recorded here.
    pub last_answer: i64,
    /// When the server last answered (epoch seconds), and how long it waits before it declares a
    /// silent node down: an agent away longer stops its runs, which the server has requeued.
    pub last_synced_at: Option<i64>,
    pub down_after_s: i64,
    /// Runs until the server has their end and all their output.
    pub runs: BTreeMap<i64, RunRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub workload_id: i64,
    pub name: String,
    /// The run's process group (its wrapper shell's pid).
    pub pgid: i32,
    /// The group leader's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), so
    /// a recycled pid is never mistaken for the run.
    pub leader_start: u64,
    pub gpus: Vec<u32>,
    pub started_at: i64,
    /// Output bytes dropped from the head of the `.out` file (it is emptied when it grows large).
    #[serde(default)]
    pub output_base: u64,
    #[serde(default)]
    pub stop: Option<StopRecord>,
    /// Set when every process of the run is gone; reported until the server acknowledges it.
    #[serde(default)]
    pub ended: Option<Finished>,
    #[serde(default)]
    pub end_acknowledged: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Epoch milliseconds: SIGTERM was sent; SIGKILL follows at `kill_at_ms`.
    pub term_at_ms: i64,
    pub kill_at_ms: i64,
    pub killed: bool,
    /// Said to the server when the run is gone (why the agent stopped it, when it chose to).
    pub note: Option<String>,
    /// The agent stopped it on its own (shutdown, server lost): the server may requeue it.
    pub by_agent: bool,
}

/// An agent's claim on its state directory.
pub struct StateDir {
    dir: PathBuf,
    _lock: Flock<File>,
}

impl StateDir {
    /// Opens (creating) the directory and locks it, so two agents never share one.
    pub fn open(dir: &Path) -> Result<StateDir, ServerError> {
        let context = |e: std::io::Error| {
            ServerError::Config(format!(
                "cannot use the agent state directory {}: {e}",
                dir.display()
            ))
        };
        std::fs::create_dir_all(dir.join("runs")).map_err(context)?;
        let file = File::create(dir.join("lock")).map_err(context)?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            ServerError::Config(format!(
                "another agent is using the state directory {}; each node's agent needs its own (--state-dir)",
                dir.display()
            ))
        })?;
        // Absolute, so a run's exit file (which also names it among processes) reads the same
        // whatever directory the agent is started from.
        let dir = dir.canonicalize().map_err(context)?;
        Ok(StateDir { dir, _lock: lock })
    }

    pub fn load(&self) -> Result<AgentState, ServerError> {
        let path = self.dir.join("state.json");
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ServerError::Config(format!(
                    "the agent state {} is unreadable ({e}); move it aside only once no run of this node is alive",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AgentState::default()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the state atomically and durably: a crash leaves the old or the new file.
    pub fn save(&self, state: &AgentState) -> Result<(), ServerError> {
        let tmp = self.dir.join("state.json.tmp");
        let mut file = File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, self.dir.join("state.json"))?;
        Ok(())
    }

    pub fn output_path(&self, run_id: i64) -> PathBuf {
        self.dir.join("runs").join(format!("{run_id}.out"))
    }

    pub fn exit_path(&self, run_id: i64) -> PathBuf {
        self.dir.join("runs").join(format!("{run_id}.exit"))
    }

    /// Removes a run's files once the server has its end and all its output.
    pub fn forget(&self, run_id: i64) {
        let _ = std::fs::remove_file(self.output_path(run_id));
        let _ = std::fs::remove_file(self.exit_path(run_id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = AgentState {
            last_answer: 7,
            ..AgentState::default()
        };
        state.runs.insert(
            3,
            RunRecord {
                workload_id: 1,
                name: "train".into(),
                pgid: 4242,
                leader_start: 99,
                gpus: vec![0, 1],
                started_at: 1_000,
                output_base: 0,
                stop: None,
                ended: None,
                end_acknowledged: false,
            },
        );
        {
            let opened = StateDir::open(dir.path()).unwrap();
            opened.save(&state).unwrap();
        }
        let reopened = StateDir::open(dir.path()).unwrap();
        assert_eq!(reopened.load().unwrap(), state);
    }

    #[test]
    fn two_agents_cannot_share_a_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let _first = StateDir::open(dir.path()).unwrap();
        let second = StateDir::open(dir.path());
        assert!(matches!(second, Err(ServerError::Config(m)) if m.contains("another agent")));
    }
}
