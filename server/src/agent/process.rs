//! Runs as process groups: started under a wrapper shell that records the exit status in a file
//! (so it is known even if the agent was away), found again through `/proc`, and signalled as a
//! group (SIGTERM, then SIGKILL).

use nix::{
    sys::signal::{killpg, Signal},
    unistd::Pid,
};
use std::{collections::BTreeSet, fs::File, path::Path, process::Stdio};

/// `sh -c` wrapper: runs the command, writes its status atomically, exits with it. It catches
/// SIGTERM (a handler, not "ignore", so the command still gets the default action) and so
/// outlives the command long enough to record how it ended.
const WRAPPER: &str = r#"trap : TERM INT
sh -c "$HOURGLASS_COMMAND"
code=$?
printf '%s\n' "$code" > "$HOURGLASS_EXIT_FILE.tmp" && mv "$HOURGLASS_EXIT_FILE.tmp" "$HOURGLASS_EXIT_FILE"
exit "$code""#;

pub struct Launch<'a> {
    pub command: &'a str,
    pub gpus: &'a [u32],
    pub workload_id: i64,
    pub run_id: i64,
    pub resumed: bool,
    pub output: &'a Path,
    pub exit_file: &'a Path,
}

/// Starts the run in a new process group whose output goes to its `.out` file (not a pipe: the
/// run must survive the agent without a broken pipe).
pub fn spawn(launch: &Launch) -> std::io::Result<tokio::process::Child> {
    let visible = launch
        .gpus
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let out = File::options()
        .create(true)
        .append(true)
        .open(launch.output)?;
    let err = out.try_clone()?;
    let _ = std::fs::remove_file(launch.exit_file);
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(WRAPPER)
        .arg("hourglass-run")
        .env("HOURGLASS_COMMAND", launch.command)
        .env("HOURGLASS_EXIT_FILE", launch.exit_file)
        .env("CUDA_VISIBLE_DEVICES", &visible)
        .env("HOURGLASS_WORKLOAD_ID", launch.workload_id.to_string())
        .env("HOURGLASS_RUN_ID", launch.run_id.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    if launch.resumed {
        command.env("HOURGLASS_RESUMED", "1");
    } else {
        command.env_remove("HOURGLASS_RESUMED");
    }
    command.spawn()
}

/// What `/proc` says now: the process groups with a live (not zombie) member, and each process's
/// start time.
#[derive(Debug, Default)]
pub struct ProcTable {
    live_groups: BTreeSet<i32>,
    live_processes: BTreeSet<i32>,
    start_times: std::collections::BTreeMap<i32, u64>,
}

impl ProcTable {
    pub fn scan() -> ProcTable {
        let mut table = ProcTable::default();
        for (pid, dir) in processes() {
            if let Ok(stat) = std::fs::read_to_string(dir.join("stat")) {
                if let Some(parsed) = parse_stat(&stat) {
                    if parsed.state != 'Z' && parsed.state != 'X' {
                        table.live_groups.insert(parsed.pgrp);
                        table.live_processes.insert(pid);
                    }
                    table.start_times.insert(pid, parsed.start_time);
                }
            }
        }
        table
    }

    /// Whether the process `pid` is running (not a zombie).
    pub fn process_alive(&self, pid: i32) -> bool {
        self.live_processes.contains(&pid)
    }

    /// Whether the run's group still has a live process. A leader with the same pid but another
    /// start time is a recycled pid: the run's group is gone.
    pub fn group_alive(&self, pgid: i32, leader_start: u64) -> bool {
        match self.start_times.get(&pgid) {
            Some(&start) if start != leader_start => false,
            _ => self.live_groups.contains(&pgid),
        }
    }
}

/// Every process now: its pid and its `/proc` folder.
fn processes() -> impl Iterator<Item = (i32, std::path::PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, entry.path()))
        })
}

/// The live leader of a run's group, found by the exit file in its environment (for a run
/// recorded just before the agent died, whose group was never written down). The exit file lies
/// in this agent's state directory, so a run of the same number started by another agent or for
/// another database on this machine is never taken for it.
pub fn find_run_leader(exit_file: &Path) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let mut needle = b"HOURGLASS_EXIT_FILE=".to_vec();
    needle.extend_from_slice(exit_file.as_os_str().as_bytes());
    processes().find_map(|(pid, dir)| {
        let environ = std::fs::read(dir.join("environ")).ok()?;
        let is_run = environ.split(|&b| b == 0).any(|var| var == needle);
        let stat = parse_stat(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
        (is_run && stat.pgrp == pid && stat.state != 'Z').then_some(pid)
    })
}

#[derive(Debug, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub pgrp: i32,
    pub start_time: u64,
}

/// Parses `/proc/<pid>/stat` (the command name may hold spaces and parentheses).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of `pid`, read right after it was spawned.
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(parse_stat(&text)?.start_time)
}

/// The status the wrapper recorded, if it got that far.
pub fn recorded_exit(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub fn terminate(pgid: i32) {
    signal(pgid, Signal::SIGTERM);
}

pub fn kill(pgid: i32) {
    signal(pgid, Signal::SIGKILL);
}

fn signal(pgid: i32, signal: Signal) {
    if pgid > 1 {
        // ESRCH (the group is already gone) is the expected end of a stop.
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_an_odd_command_name_parses() {
        let line = "4242 (my (odd) job) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'S',
                pgrp: 4242,
                start_time: 123456
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[tokio::test]
    async fn a_run_records_its_exit_status_and_its_group_is_found_then_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (out, exit) = (dir.path().join("1.out"), dir.path().join("1.exit"));
        let mut child = spawn(&Launch {
            command: "echo hello; exit 3",
            gpus: &[0, 1],
            workload_id: 1,
            run_id: 1,
            resumed: false,
            output: &out,
            exit_file: &exit,
        })
        .unwrap();
        let pgid = child.id().unwrap() as i32;
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(recorded_exit(&exit), Some(3));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
        assert!(!ProcTable::scan().group_alive(pgid, 0));
    }

    #[tokio::test]
    async fn a_terminated_run_is_recorded_as_ended_by_the_signal() {
        let dir = tempfile::tempdir().unwrap();
        let (out, exit) = (dir.path().join("2.out"), dir.path().join("2.exit"));
        let mut child = spawn(&Launch {
            command: "sleep 30",
            gpus: &[0],
            workload_id: 1,
            run_id: 987_654_321,
            resumed: false,
            output: &out,
            exit_file: &exit,
        })
        .unwrap();
        let pgid = child.id().unwrap() as i32;
        let start = start_time(pgid).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(ProcTable::scan().group_alive(pgid, start));
        assert_eq!(find_run_leader(&exit), Some(pgid), "found by its exit file");
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(
            find_run_leader(&elsewhere.path().join("2.exit")),
            None,
            "the same run number in another state directory is another run"
        );
        terminate(pgid);
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(143));
        assert_eq!(recorded_exit(&exit), Some(143));
    }
}
