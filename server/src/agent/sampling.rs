//! The agent's GPU sampling: `nvidia-smi` every few seconds (10 by default), each GPU's
//! utilization, memory and power, buffered until a sync carries them to the server.

use super::protocol::GpuSample;
use std::time::Duration;
use tokio::{process::Command, sync::mpsc};

const QUERY: &str = "--query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw";
const TIMEOUT: Duration = Duration::from_secs(10);

/// The samples one `nvidia-smi` answer holds (`0, 41, 1024, 81559, 250.5` per GPU). A line that
/// does not read (a GPU reporting `[N/A]` for its utilization, a lost GPU's error) is left out:
/// the health checks report lost GPUs.
pub fn parse(text: &str, at: i64, every_s: u32) -> Vec<GpuSample> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let [gpu, utilization, used, total, power] = cells[..] else {
                return None;
            };
            let utilization: f64 = utilization.parse().ok()?;
            Some(GpuSample {
                at,
                gpu: gpu.parse().ok()?,
                utilization: utilization.clamp(0.0, 100.0),
                memory_used_mib: used.parse().unwrap_or(0.0),
                memory_total_mib: total.parse().unwrap_or(0.0),
                power_w: power.parse().ok(),
                every_s,
            })
        })
        .collect()
}

/// Samples every `every_s` seconds, sending each answer's samples; a failed `nvidia-smi` sends
/// nothing that round.
pub fn spawn(every_s: u32, now: fn() -> i64) -> mpsc::Receiver<Vec<GpuSample>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(u64::from(every_s.max(1))));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let run = Command::new("nvidia-smi")
                .args([QUERY, "--format=csv,noheader,nounits"])
                .kill_on_drop(true)
                .output();
            let samples = match tokio::time::timeout(TIMEOUT, run).await {
                Ok(Ok(output)) if output.status.success() => {
                    parse(&String::from_utf8_lossy(&output.stdout), now(), every_s)
                }
                Ok(Ok(output)) => {
                    tracing::debug!(code = ?output.status.code(), "nvidia-smi sampling failed");
                    continue;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "nvidia-smi could not run for sampling");
                    continue;
                }
                Err(_) => continue,
            };
            if !samples.is_empty() && tx.send(samples).await.is_err() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_samples_read_per_gpu_and_a_gpu_without_utilization_is_left_out() {
        let text =
            "0, 41, 1024, 81559, 250.5\n1, [N/A], 0, 81559, [N/A]\n2, 100, 80000, 81559, [N/A]\n";
        let samples = parse(text, 1_000, 10);
        assert_eq!(samples.len(), 2);
        assert_eq!(
            samples[0],
            GpuSample {
                at: 1_000,
                gpu: 0,
                utilization: 41.0,
                memory_used_mib: 1024.0,
                memory_total_mib: 81559.0,
                power_w: Some(250.5),
                every_s: 10,
            }
        );
        assert_eq!((samples[1].gpu, samples[1].power_w), (2, None));
        assert!(parse("NVIDIA-SMI has failed\n", 0, 10).is_empty());
    }
}
