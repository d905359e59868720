//! A steady trickle of demo workloads: debug runs, free sweeps and training jobs, each a real
//! `sleep` the demo agents run.

use crate::{
    runtime::Runtime,
    workloads::{domain::SubmitWorkload, service as workloads},
};
use app::model::CurrentUser;
use sqlx::AnyPool;
use std::time::Duration;

/// `(user, project)` pairs the trickle submits as.
const SUBMITTERS: [(&str, &str); 6] = [
    ("ada", "lang/pretrain"),
    ("bob", "lang/eval"),
    ("dee", "lang/posttrain"),
    ("cy", "vision/robotics"),
    ("cy", "vision/vlm"),
    ("dee", "vision/vlm"),
];

/// A tiny deterministic generator (xorshift64*): the demo needs variety, not cryptography.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Submits a workload every `every` until the process ends, the first as soon as a demo node has
/// connected (before that, a submission is refused: nothing could run).
pub fn spawn(pool: AnyPool, runtime: Runtime, every: Duration) {
    tokio::spawn(async move {
        for _ in 0..600 {
            let mut db = match pool.acquire().await {
                Ok(db) => db,
                Err(_) => continue,
            };
            let clusters = crate::clusters::in_use(&mut db).await;
            if clusters.is_ok_and(|list| list.iter().all(|c| c.healthy_gpus > 0)) {
                break;
            }
            drop(db);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut rng = Rng(crate::clock::Clock::entropy() | 1);
        let mut n = 0u64;
        loop {
            n += 1;
            if let Err(error) = submit_one(&pool, &runtime, &mut rng, n).await {
                tracing::warn!(%error, "demo trickle: submission refused");
            }
            tokio::time::sleep(every).await;
        }
    });
}

async fn submit_one(
    pool: &AnyPool,
    runtime: &Runtime,
    rng: &mut Rng,
    n: u64,
) -> Result<(), crate::ServerError> {
    let (username, project) = SUBMITTERS[rng.below(SUBMITTERS.len() as u64) as usize];
    let Some(user) = crate::users::repo::find_user_by_username(pool, username).await? else {
        return Ok(());
    };
    let actor = CurrentUser {
        id: user.user_id,
        username: user.username.clone(),
        role: app::model::Role::Researcher,
    };
    // Each cluster in turn gets work sized for it: a gang of 16 needs the 16-GPU cluster.
    let cluster = super::CLUSTERS[(n % super::CLUSTERS.len() as u64) as usize];
    let largest: u64 = super::NODES
        .iter()
        .filter(|(_, _, c)| *c == cluster)
        .map(|(_, gpus, _)| u64::from(*gpus))
        .sum();
    let (kind, gpus, min_runtime_s, seconds) = match rng.below(10) {
        0..=3 => ("debug", 1 + rng.below(2), 900, 20 + rng.below(60)),
        4..=6 => ("sweep", 1 + rng.below(4), 0, 60 + rng.below(240)),
        7..=8 => (
            "train",
            [4, 8][rng.below(2) as usize],
            3600,
            120 + rng.below(480),
        ),
        _ => ("pretrain", largest, 3600, 300 + rng.below(600)),
    };
    let input = SubmitWorkload {
        project: project.to_string(),
        name: format!("{kind}-{n}"),
        command: format!(
            "echo \"{kind} on GPUs $CUDA_VISIBLE_DEVICES\"; sleep {seconds}; echo done"
        ),
        gpus: gpus as i64,
        min_runtime_s,
        resumable: kind != "debug",
        priority: rng.below(3) as i64,
        cluster: Some(cluster.into()),
    };
    workloads::submit(pool, runtime, &actor, input).await?;
    Ok(())
}
