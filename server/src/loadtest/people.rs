//! Simulated people: submissions through the JSON API, and readers signed in to the pages.

use super::{seed::Team, Shared};
use serde_json::{json, Value};
use std::{
    sync::{atomic::Ordering, Arc},
    time::{Duration, Instant},
};

/// Mean GPU-seconds of one debug workload (1 GPU, 60–180 s).
pub const DEBUG_GPU_S: f64 = 120.0;

/// A small deterministic generator (xorshift64), so every run submits the same mix.
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Dice {
        Dice(seed.max(1))
    }

    pub fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides.max(1)
    }
}

/// Training work for a (non-debug) team: 1–16 GPUs for 10 minutes to 2 hours, resumable.
pub fn training(team: &Team, i: u64, dice: &mut Dice) -> Value {
    const GPUS: [u64; 6] = [1, 2, 4, 8, 8, 16];
    json!({
        "project": team.project,
        "name": format!("train-{i}"),
        "command": format!("sleep {}", 600 + dice.roll(6_600)),
        "gpus": GPUS[dice.roll(6) as usize],
        "min_runtime_s": 1_800,
        "resumable": true,
        "priority": dice.roll(2),
    })
}

/// Debug work (DESIGN §5: a minimum runtime of at most 15 minutes, at most 8 GPUs): 1 GPU for
/// one to three minutes.
pub fn debug(team: &Team, i: u64, dice: &mut Dice) -> Value {
    json!({
        "project": team.project,
        "name": format!("debug-{i}"),
        "command": format!("sleep {}", 60 + dice.roll(121)),
        "gpus": 1,
        "min_runtime_s": 300,
        "resumable": false,
        "priority": 1,
    })
}

/// Submits `body` as `team`; a debug workload's submission time is kept for its start latency.
pub async fn submit(shared: Arc<Shared>, team: Team, body: Value) {
    let is_debug = body["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("debug-"));
    let began = Instant::now();
    let sent = shared
        .http
        .post(format!("{}/api/v1/workloads", shared.base))
        .bearer_auth(&team.token)
        .json(&body)
        .send()
        .await;
    let created = match sent {
        Ok(response) if response.status() == reqwest::StatusCode::CREATED => {
            response.json::<Value>().await.map_err(|e| e.to_string())
        }
        Ok(response) => Err(format!(
            "answered {}: {}",
            response.status(),
            response.text().await.unwrap_or_default()
        )),
        Err(error) => Err(error.to_string()),
    };
    match created {
        Ok(view) => {
            shared.submits.push(shared.window.phase(), began.elapsed());
            let id = view["id"].as_i64().unwrap_or_default();
            shared.last_id.fetch_max(id, Ordering::Relaxed);
            shared.submitted.fetch_add(1, Ordering::Relaxed);
            // Debug starts are measured for work submitted in the window.
            if is_debug && shared.window.is_open() {
                shared.debug_submitted(id, began);
            }
        }
        Err(error) => shared
            .errors
            .record(format!("submitting {}: {error}", body["name"])),
    }
}

/// Signs `person` in through the sign-in form; returns the session cookie.
pub async fn sign_in(shared: &Shared, person: &str, password: &str) -> Result<String, String> {
    let response = shared
        .http
        .post(format!("{}/login", shared.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            serde_urlencoded::to_string([("username", person), ("password", password)])
                .unwrap_or_default(),
        )
        .send()
        .await
        .map_err(|e| format!("signing {person} in: {e}"))?;
    crate::auth::session::session_cookie(response.headers())
        .ok_or_else(|| format!("signing {person} in: no session ({})", response.status()))
}

/// A person reading the queue page and a workload's page in turn, 1–3 s on each, until the end.
pub async fn read(shared: Arc<Shared>, cookie: String, seed: u64) {
    let mut dice = Dice::new(seed);
    // Arrivals spread over the first 3 s.
    tokio::time::sleep(Duration::from_millis(dice.roll(3_000))).await;
    let mut turn = 0_u64;
    while !shared.is_over() {
        turn += 1;
        let (path, queue_page) = if turn % 2 == 1 {
            ("/queue".to_string(), true)
        } else {
            let last = shared.last_id.load(Ordering::Relaxed).max(1) as u64;
            (format!("/workloads/{}", 1 + dice.roll(last)), false)
        };
        let began = Instant::now();
        let sent = shared
            .http
            .get(format!("{}{path}", shared.base))
            .header("cookie", &cookie)
            .send()
            .await;
        let read = match sent {
            Ok(response) if response.status().is_success() => response
                .bytes()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Ok(response) => Err(format!("answered {}", response.status())),
            Err(error) => Err(error.to_string()),
        };
        match read {
            Ok(()) => {
                let kind = match queue_page {
                    true => &shared.queue_pages,
                    false => &shared.workload_pages,
                };
                kind.push(shared.window.phase(), began.elapsed());
            }
            Err(error) => shared.errors.record(format!("GET {path}: {error}")),
        }
        tokio::time::sleep(Duration::from_millis(1_000 + dice.roll(2_000))).await;
    }
}
