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

/// A simulated workload's own utilization level in percent: 35–95 from a multiplicative hash of
/// its id, or 1 for the one in seven that sits nearly idle.
pub fn simulated_level(workload: i64) -> f64 {
    let mix = (workload as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    if workload % 7 == 3 {
        1.0
    } else {
        35.0 + (mix % 61) as f64
    }
}

/// Plausible samples for simulated GPUs (the demo's nodes, which have no `nvidia-smi`): each
/// workload keeps a level of its own between 35% and 95% that drifts over a few minutes, and
/// about one in seven sits nearly idle, as stuck jobs do. `runs` are `(workload, GPUs)`.
pub fn simulated(runs: &[(i64, Vec<u32>)], at: i64, every_s: u32) -> Vec<GpuSample> {
    runs.iter()
        .flat_map(|(workload, gpus)| {
            let level = simulated_level(*workload);
            let idle = level < 5.0;
            gpus.iter().map(move |&gpu| {
                let phase = (at as f64 / 240.0) + f64::from(gpu);
                let utilization = if idle {
                    level
                } else {
                    (level + 5.0 * phase.sin()).clamp(0.0, 100.0)
                };
                GpuSample {
                    at,
                    gpu,
                    utilization,
                    memory_used_mib: (81_559.0 * (0.2 + utilization / 125.0)).round(),
                    memory_total_mib: 81_559.0,
                    power_w: Some((90.0 + 6.1 * utilization).round()),
                    every_s,
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_samples_cover_every_held_gpu_with_a_steady_level_per_workload() {
        let runs = [(1, vec![0, 1]), (3, vec![2])];
        let samples = simulated(&runs, 1_000, 10);
        assert_eq!(samples.iter().map(|s| s.gpu).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(samples
            .iter()
            .all(|s| (0.0..=100.0).contains(&s.utilization)));
        assert_eq!(
            samples[2].utilization, 1.0,
            "workload 3 is one of the idle ones"
        );
        let later = simulated(&runs, 1_060, 10);
        assert!((later[0].utilization - samples[0].utilization).abs() <= 10.0);
        assert_eq!(
            simulated(&runs, 1_000, 10),
            samples,
            "the same moment, the same figures"
        );
    }

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
