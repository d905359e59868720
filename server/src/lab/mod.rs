//! The simulator lab: leadership and administrators run the three policies (fair share, the
//! priority baseline, the SLURM peer) on a chosen input on the server and compare them. Runs are kept in memory (the last [`KEEP`]); they are what-if studies,
//! not records, and a restart clears them. One run simulates at a time, off the async runtime, so
//! the lab never slows the live scheduler's passes much on a small server.

pub mod gantt;
pub mod inputs;
pub mod results;

use crate::ServerError;
use app::lab::{Gantt, LabForm, LabResult, LabRunView, LabSources, LabState};
use app::model::{CurrentUser, Role};
use scheduler::sim::{self, SimConfig, SimInput, SimOutput};
use scheduler::Policy;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How many runs the lab remembers.
pub const KEEP: usize = 5;
/// Steps a run reports: fair share, the priority baseline, the SLURM peer, summarising.
const STEPS: u32 = 4;

#[derive(Clone)]
pub struct Lab {
    inner: Arc<Inner>,
}

struct Inner {
    philly_trace: Option<PathBuf>,
    runs: Mutex<VecDeque<Arc<Run>>>,
    next_id: AtomicU64,
    /// One simulation at a time.
    worker: tokio::sync::Semaphore,
}

struct Run {
    id: u64,
    label: String,
    parameters: String,
    requested_by: String,
    requested_at: i64,
    state: Mutex<State>,
}

enum State {
    Waiting,
    Running {
        step: u32,
        stage: &'static str,
        since: Instant,
    },
    Done {
        result: Box<LabResult>,
        outputs: Box<Outputs>,
        elapsed_s: f64,
    },
    Failed {
        message: String,
    },
}

struct Outputs {
    input: SimInput,
    fair_share: SimOutput,
    priority: SimOutput,
    slurm: SimOutput,
}

/// Only leadership and administrators may use the lab: it spends the server's CPU on what-if
/// studies of the whole organisation.
fn require_lab(actor: &CurrentUser) -> Result<(), ServerError> {
    match actor.role {
        Role::Leadership | Role::Admin => Ok(()),
        Role::Researcher => Err(ServerError::Forbidden(
            "Only leadership and administrators can use the simulator lab.".into(),
        )),
    }
}

impl Lab {
    /// `philly_trace`: the Philly trace's CSV (`philly_by_vc.csv`) if the operator offers it.
    pub fn new(philly_trace: Option<PathBuf>) -> Lab {
        Lab {
            inner: Arc::new(Inner {
                philly_trace: philly_trace.filter(|p| p.is_file()),
                runs: Mutex::new(VecDeque::new()),
                next_id: AtomicU64::new(1),
                worker: tokio::sync::Semaphore::new(1),
            }),
        }
    }

    pub fn sources(&self, actor: &CurrentUser) -> Result<LabSources, ServerError> {
        require_lab(actor)?;
        Ok(match &self.inner.philly_trace {
            Some(_) => LabSources {
                philly: true,
                philly_note: "Microsoft's Philly trace of 2017, one team per virtual cluster."
                    .into(),
            },
            None => LabSources {
                philly: false,
                philly_note: "Not offered on this server (its administrator can add it).".into(),
            },
        })
    }

    /// Validates `form`, builds its input and queues the run, asked for at `now`; returns its id.
    pub async fn start(
        &self,
        actor: &CurrentUser,
        form: LabForm,
        now: i64,
    ) -> Result<u64, ServerError> {
        require_lab(actor)?;
        let philly = self.inner.philly_trace.clone();
        let resolved =
            tokio::task::spawn_blocking(move || inputs::resolve(&form, philly.as_deref()))
                .await
                .map_err(|e| ServerError::Config(format!("lab input task failed: {e}")))??;
        let run = Arc::new(Run {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            label: resolved.label,
            parameters: parameters(&resolved.config),
            requested_by: actor.username.clone(),
            requested_at: now,
            state: Mutex::new(State::Waiting),
        });
        {
            let mut runs = self.inner.runs.lock().expect("lab runs lock");
            runs.push_front(run.clone());
            runs.truncate(KEEP);
        }
        let lab = self.clone();
        let id = run.id;
        tokio::spawn(async move {
            let Ok(_permit) = lab.inner.worker.acquire().await else {
                return;
            };
            let task_run = run.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                simulate(&task_run, resolved.input, resolved.config)
            })
            .await;
            if let Err(error) = outcome {
                tracing::error!(%error, id, "lab run panicked");
                *run.state.lock().expect("lab run lock") = State::Failed {
                    message: "The simulation stopped unexpectedly; it has been logged.".into(),
                };
            }
        });
        Ok(id)
    }

    pub fn runs(&self, actor: &CurrentUser) -> Result<Vec<LabRunView>, ServerError> {
        require_lab(actor)?;
        let runs = self.inner.runs.lock().expect("lab runs lock");
        Ok(runs.iter().map(|r| view(r, false)).collect())
    }

    pub fn run(&self, actor: &CurrentUser, id: u64) -> Result<LabRunView, ServerError> {
        require_lab(actor)?;
        let run = self.find(id)?;
        Ok(view(&run, true))
    }

    pub fn gantt(
        &self,
        actor: &CurrentUser,
        id: u64,
        policy: &str,
        gpus: u32,
        from: i64,
        to: i64,
    ) -> Result<Gantt, ServerError> {
        require_lab(actor)?;
        let run = self.find(id)?;
        let state = run.state.lock().expect("lab run lock");
        let State::Done {
            outputs, result, ..
        } = &*state
        else {
            return Err(ServerError::conflict(
                "",
                "This run has not finished yet; its chart appears when it has.",
            ));
        };
        let output = match policy {
            "fair-share" => &outputs.fair_share,
            "priority" => &outputs.priority,
            "slurm" => &outputs.slurm,
            other => {
                return Err(ServerError::invalid(
                    "policy",
                    format!("Unknown policy \"{other}\": choose fair-share, priority or slurm."),
                ))
            }
        };
        Ok(gantt::build(
            &outputs.input,
            &output.segments,
            policy,
            result.horizon_s,
            gpus,
            from,
            to,
        ))
    }

    fn find(&self, id: u64) -> Result<Arc<Run>, ServerError> {
        let runs = self.inner.runs.lock().expect("lab runs lock");
        runs.iter().find(|r| r.id == id).cloned().ok_or_else(|| {
            ServerError::NotFound(format!(
                "There is no lab run {id}; the lab keeps the last {KEEP} runs until the server restarts."
            ))
        })
    }
}

/// Runs the three policies, reporting each step in `run`'s state.
fn simulate(run: &Run, input: SimInput, config: SimConfig) {
    let started = Instant::now();
    let set = |step: u32, stage: &'static str| {
        *run.state.lock().expect("lab run lock") = State::Running {
            step,
            stage,
            since: started,
        };
    };
    let timed = |policy: Policy| {
        let t = Instant::now();
        let mut out = sim::run(&input, &SimConfig { policy, ..config });
        out.report.wall_s = (t.elapsed().as_secs_f64() * 1e3).round() / 1e3;
        out
    };
    set(0, "Simulating fair share");
    let fair_share = timed(Policy::FairShare);
    set(1, "Simulating the priority baseline");
    let priority = timed(Policy::Priority);
    set(2, "Simulating the SLURM peer");
    let slurm = timed(Policy::Slurm);
    set(3, "Summarising");
    let result = results::summarise(
        &input,
        [&fair_share.report, &priority.report, &slurm.report],
    );
    *run.state.lock().expect("lab run lock") = State::Done {
        result: Box::new(result),
        outputs: Box::new(Outputs {
            input,
            fair_share,
            priority,
            slurm,
        }),
        elapsed_s: started.elapsed().as_secs_f64(),
    };
}

/// A run's settings in words.
fn parameters(config: &SimConfig) -> String {
    use app::workloads::sentences::duration;
    format!(
        "{} lookback window, minimum runtimes capped at {}; SLURM time limits {}× the true duration, at most {}, priorities recalculated every {}",
        duration(config.window),
        duration(config.max_min_runtime),
        config.time_limit_factor,
        duration(config.slurm.max_wall),
        duration(config.slurm.calc_period)
    )
}

fn view(run: &Run, with_result: bool) -> LabRunView {
    let state = run.state.lock().expect("lab run lock");
    let headline = match &*state {
        State::Done { result, .. } => Some(result.headline()),
        _ => None,
    };
    let (name, step, stage, elapsed_s, error, result) = match &*state {
        State::Waiting => (
            LabState::Waiting,
            0,
            "Waiting for another run to finish".to_string(),
            0.0,
            None,
            None,
        ),
        State::Running { step, stage, since } => (
            LabState::Running,
            *step,
            stage.to_string(),
            since.elapsed().as_secs_f64(),
            None,
            None,
        ),
        State::Done {
            result, elapsed_s, ..
        } => (
            LabState::Done,
            STEPS,
            "Done".to_string(),
            *elapsed_s,
            None,
            with_result.then(|| (**result).clone()),
        ),
        State::Failed { message } => (
            LabState::Failed,
            0,
            "Failed".to_string(),
            0.0,
            Some(message.clone()),
            None,
        ),
    };
    LabRunView {
        id: run.id,
        label: run.label.clone(),
        requested_by: run.requested_by.clone(),
        state: name,
        step,
        steps: STEPS,
        stage,
        elapsed_s,
        error,
        result,
        parameters: run.parameters.clone(),
        requested_at: run.requested_at,
        headline,
    }
}
