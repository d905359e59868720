//! The agent's own health checks: `nvidia-smi` (GPUs that disappear, Xid errors, uncorrectable
//! ECC errors, "GPU is lost") and an operator's `--health-cmd` (non-zero exit = unhealthy, its
//! first output line = the reason). The first failing check names the reason.

use std::time::Duration;
use tokio::process::Command;

const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(30);
const HEALTH_CMD_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct HealthChecks {
    /// Query `nvidia-smi` (the agent found its GPUs there), expecting this many GPUs.
    pub nvidia_gpus: Option<u32>,
    pub command: Option<String>,
}

impl HealthChecks {
    /// `Ok` when healthy, else the reason.
    pub async fn run(&self) -> Result<(), String> {
        if let Some(expected) = self.nvidia_gpus {
            check_nvidia_smi(expected).await?;
        }
        if let Some(command) = &self.command {
            check_command(command).await?;
        }
        Ok(())
    }
}

async fn check_nvidia_smi(expected: u32) -> Result<(), String> {
    let run = Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total",
            "--format=csv,noheader,nounits",
        ])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(NVIDIA_SMI_TIMEOUT, run).await {
        Err(_) => {
            return Err(format!(
                "nvidia-smi did not answer within {} s",
                NVIDIA_SMI_TIMEOUT.as_secs()
            ))
        }
        Ok(Err(error)) => return Err(format!("nvidia-smi could not run: {error}")),
        Ok(Ok(output)) => output,
    };
    assess_nvidia_smi(
        output.status.code(),
        &String::from_utf8_lossy(&output.stdout),
        &String::from_utf8_lossy(&output.stderr),
        expected,
    )
}

/// Reads one `nvidia-smi --query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total` answer.
pub fn assess_nvidia_smi(
    code: Option<i32>,
    stdout: &str,
    stderr: &str,
    expected: u32,
) -> Result<(), String> {
    const FATAL: [&str; 4] = [
        "gpu is lost",
        "unable to determine the device handle",
        "fallen off the bus",
        "xid",
    ];
    if let Some(line) = stdout.lines().chain(stderr.lines()).find(|line| {
        let lower = line.to_ascii_lowercase();
        FATAL.iter().any(|needle| lower.contains(needle))
    }) {
        return Err(format!("nvidia-smi: {}", line.trim()));
    }
    if code != Some(0) {
        let first = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        return Err(match code {
            Some(code) => format!("nvidia-smi failed (exit {code}): {first}"),
            None => format!("nvidia-smi was killed: {first}"),
        });
    }
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(str::trim).collect())
        .collect();
    if (rows.len() as u32) < expected {
        return Err(format!(
            "only {} of this node's {expected} GPUs answer nvidia-smi",
            rows.len()
        ));
    }
    for row in &rows {
        let index = row.first().copied().unwrap_or("?");
        // "[N/A]" where ECC is off or not reported.
        if let Some(errors) = row.get(2).and_then(|v| v.parse::<u64>().ok()) {
            if errors > 0 {
                return Err(format!(
                    "GPU {index}: {errors} uncorrectable ECC error{} since the driver loaded",
                    if errors == 1 { "" } else { "s" }
                ));
            }
        }
    }
    Ok(())
}

async fn check_command(command: &str) -> Result<(), String> {
    let run = Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(HEALTH_CMD_TIMEOUT, run).await {
        Err(_) => {
            return Err(format!(
                "the health command did not finish within {} s",
                HEALTH_CMD_TIMEOUT.as_secs()
            ))
        }
        Ok(Err(error)) => return Err(format!("the health command could not run: {error}")),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| match output.status.code() {
            Some(code) => format!("the health command exited with {code}"),
            None => "the health command was killed".into(),
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEALTHY: &str = "0, GPU-aaa, 0\n1, GPU-bbb, [N/A]\n";

    #[test]
    fn healthy_gpus_pass() {
        assert_eq!(assess_nvidia_smi(Some(0), HEALTHY, "", 2), Ok(()));
    }

    #[test]
    fn a_missing_gpu_is_unhealthy() {
        let reason = assess_nvidia_smi(Some(0), "0, GPU-aaa, 0\n", "", 2).unwrap_err();
        assert_eq!(reason, "only 1 of this node's 2 GPUs answer nvidia-smi");
    }

    #[test]
    fn an_xid_error_or_a_lost_gpu_is_unhealthy_with_its_line() {
        let xid = assess_nvidia_smi(Some(0), HEALTHY, "Xid 79: GPU has fallen off the bus\n", 2);
        assert_eq!(
            xid.unwrap_err(),
            "nvidia-smi: Xid 79: GPU has fallen off the bus"
        );
        let lost = assess_nvidia_smi(Some(15), "", "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU\n", 2);
        assert!(lost.unwrap_err().contains("GPU is lost"));
    }

    #[test]
    fn uncorrectable_ecc_errors_are_unhealthy() {
        let reason = assess_nvidia_smi(Some(0), "0, GPU-aaa, 0\n1, GPU-bbb, 2\n", "", 2);
        assert_eq!(
            reason.unwrap_err(),
            "GPU 1: 2 uncorrectable ECC errors since the driver loaded"
        );
    }

    #[test]
    fn a_failing_nvidia_smi_says_how() {
        let reason = assess_nvidia_smi(
            Some(9),
            "",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
            2,
        );
        assert!(reason
            .unwrap_err()
            .starts_with("nvidia-smi failed (exit 9): NVIDIA-SMI has failed"));
    }

    #[tokio::test]
    async fn a_health_command_names_its_reason_or_its_exit() {
        let checks = |command: &str| HealthChecks {
            nvidia_gpus: None,
            command: Some(command.into()),
        };
        assert_eq!(checks("true").run().await, Ok(()));
        assert_eq!(
            checks("echo 'fan 3 stopped'; echo more; exit 1")
                .run()
                .await,
            Err("fan 3 stopped".into())
        );
        assert_eq!(
            checks("exit 4").run().await,
            Err("the health command exited with 4".into())
        );
    }
}
