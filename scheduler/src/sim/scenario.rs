//! A seeded generator for the conditions the reference describes: a 1,024-GPU cluster, ~15 teams
//! under a few programs with one project funded for 35%, demand well above capacity, bursty team
//! seasons, priority inflation (most work says "high"), many short debug workloads, free sweeps
//! (`min_runtime = 0`) and node outages. The same code, scaled down, feeds the demo's history.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::rng::Rng;
use super::trace::{write_trace, TraceRecord};
use crate::ids::{Time, DAY, HOUR};
use crate::tree::BudgetTree;

/// What to generate. Start from [`ScenarioConfig::reference`] or [`ScenarioConfig::small`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioConfig {
    pub seed: u64,
    pub days: u32,
    /// GPUs of each host, in order; names are `name_prefix` and a 3-digit index.
    pub hosts: Vec<u32>,
    pub name_prefix: String,
    pub gpu_model: String,
    /// `path → share` for every tree node, inner ones too.
    pub shares: Vec<(String, f64)>,
    /// Allocated (funded) work arriving, as a fraction of the cluster's GPU time, on average.
    pub allocated_load: f64,
    /// Free sweeps arriving, as a fraction of the cluster's GPU time (the reference delivered 18%
    /// of its GPU time unallocated).
    pub free_load: f64,
    /// Parked interactive sessions (the baseline's squatting: days long, protected there until
    /// done), as a fraction of the cluster's GPU time, from teams in season.
    pub squat_load: f64,
    /// Debug workloads per day per 1,024 GPUs.
    pub debug_per_day: f64,
    /// Expected host outages per day per 128 hosts.
    pub outages_per_day: f64,
    /// Which priorities the workloads say.
    pub priorities: PriorityMix,
    /// The largest gang a team runs, as a multiple of its funded GPUs in whole hosts (at most 16
    /// hosts, or 16 per 1,024 GPUs on larger clusters).
    pub gang_scale: f64,
    /// Multiplies the weight of multi-host training among a team's funded work.
    pub large_weight: f64,
}

/// The priorities workloads declare (they order work within a leaf under fair share, and
/// globally under the priority baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityMix {
    /// What people under a priority scheduler learn to say, and the baseline's best case: debug
    /// work says high (9 in 10), funded work is mixed (half high), free sweeps mostly say low.
    Realistic,
    /// Inflation on everything, sweeps included: four in five workloads say high.
    Inflated,
}

/// The class of work a row belongs to, for its priority draw.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Debug,
    Funded,
    Sweep,
}

impl ScenarioConfig {
    /// The reference's cluster: 128 hosts × 8 GPUs, 3 programs, 15 teams, `lang/pretrain` at 35%.
    pub fn reference(seed: u64, days: u32) -> ScenarioConfig {
        let shares = [
            ("lang", 60.0),
            ("lang/pretrain", 35.0),
            ("lang/posttrain", 10.0),
            ("lang/eval", 8.0),
            ("lang/data", 7.0),
            ("multimodal", 25.0),
            ("multimodal/vision", 8.0),
            ("multimodal/robotics", 6.0),
            ("multimodal/speech", 5.0),
            ("multimodal/video", 4.0),
            ("multimodal/agents", 2.0),
            ("science", 15.0),
            ("science/climate", 4.0),
            ("science/bio", 3.0),
            ("science/chem", 3.0),
            ("science/materials", 2.0),
            ("science/astro", 2.0),
            ("science/theory", 1.0),
        ];
        ScenarioConfig {
            seed,
            days,
            hosts: vec![8; 128],
            name_prefix: "h100-".into(),
            gpu_model: "H100".into(),
            shares: shares.iter().map(|(p, s)| (p.to_string(), *s)).collect(),
            allocated_load: 0.9,
            free_load: 0.22,
            squat_load: 0.0,
            debug_per_day: 1000.0,
            outages_per_day: 1.5,
            priorities: PriorityMix::Realistic,
            gang_scale: 1.0,
            large_weight: 1.0,
        }
    }

    /// A small cluster (8 + 8 + 8 + 4 GPUs) with the caller's leaves (`"program/project"`), every
    /// node at share 1: the shape of the demo, for a month of history.
    pub fn small(seed: u64, days: u32, leaves: &[&str]) -> ScenarioConfig {
        let mut shares: BTreeMap<String, f64> = BTreeMap::new();
        for leaf in leaves {
            let mut prefix = String::new();
            for part in leaf.trim_matches('/').split('/') {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                shares.insert(prefix.clone(), 1.0);
            }
        }
        ScenarioConfig {
            hosts: vec![8, 8, 8, 4],
            name_prefix: "gpu-".into(),
            shares: shares.into_iter().collect(),
            outages_per_day: 4.0,
            ..ScenarioConfig::reference(seed, days)
        }
    }
}

/// The three input files of DESIGN §6, as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub tree_toml: String,
    pub cluster_toml: String,
    pub trace_csv: String,
}

/// Hours of funded work already queued when the trace starts, so it opens on a busy cluster.
const WARM_HOURS: Time = 12;

/// What kind of work a row is; only shapes the draw.
#[derive(Clone, Copy)]
enum Kind {
    Interactive,
    Medium,
    Training,
    Large,
}

/// Generates the scenario. Deterministic in `config` (the seed included).
///
/// Each team alternates *seasons*: on for 3–8 days, off for 1–5 (the largest team is always on).
/// Its funded work arrives hour by hour at a rate proportional to its share, several times higher
/// in season than out of it, scaled so all teams together submit `allocated_load` of the cluster on
/// average: in season a team asks for a little over its share (about 1.1× with the reference
/// preset: 0.9 of the cluster spread over teams in season about two thirds of the time). Gangs
/// are sized to the team's funded GPUs, the most the old scheduler would keep protected for it.
/// Debug workloads (1–8 GPUs, 5–15 min minimum runtime) arrive as a separate stream, from teams
/// in proportion to their share and mostly while they are in season (that is when they develop).
///
/// Free sweeps (`min_runtime = 0`) come in batches of 128–512 tasks per 1,024 GPUs, of 1–2 GPUs
/// and 3–16 h each, submitted together, `free_load` of the cluster's time in all: the work that
/// keeps GPUs busy whatever the budgets, and most of what makes demand exceed capacity.
/// Priorities follow `config.priorities`: with [`PriorityMix::Realistic`] (the presets) debug
/// work says high, which is the priority baseline's best case (it may preempt the sweeps and the
/// preemptible work around it); [`PriorityMix::Inflated`] has four in five workloads say high,
/// sweeps included, as the reference saw under its old scheduler.
///
/// With `squat_load > 0` (0 in the presets), teams in season also park interactive sessions
/// (1–8 GPUs, 1–4 days, 8 h minimum runtime, not resumable): the squatting the reference saw
/// under the old scheduler. Training work is resumable, interactive sessions are not.
pub fn generate(config: &ScenarioConfig) -> Scenario {
    let tree = BudgetTree::from_paths(config.shares.iter().map(|(p, s)| (p.as_str(), *s)))
        .expect("scenario shares form a valid tree");
    let mut rng = Rng::new(config.seed);
    let gpus: f64 = config.hosts.iter().map(|&g| f64::from(g)).sum();
    let node_size = config.hosts.iter().copied().max().unwrap_or(8).max(1);
    let horizon = Time::from(config.days) * DAY;
    let hours = Time::from(config.days) * 24;
    let leaves: Vec<(String, f64)> = tree
        .leaves()
        .map(|l| (tree.path(l).to_string(), tree.latest().fraction(l)))
        .collect();
    let biggest = leaves.iter().map(|l| l.1).fold(0.0, f64::max);

    // Seasons: per team, whether each hour is in season.
    let seasons: Vec<Vec<bool>> = leaves
        .iter()
        .map(|&(_, f)| {
            let mut on = vec![true; hours as usize];
            if f < biggest {
                let mut state = rng.chance(0.6);
                let mut h = 0i64;
                // Start somewhere inside the first period, so teams are out of phase.
                let mut left = rng.range(0, 5 * 24);
                while h < hours {
                    if left == 0 {
                        state = !state;
                        left = if state {
                            rng.range(3 * 24, 8 * 24)
                        } else {
                            rng.range(24, 5 * 24)
                        };
                    }
                    on[h as usize] = state;
                    left -= 1;
                    h += 1;
                }
            }
            on
        })
        .collect();
    let (m_on, m_off) = {
        let off = 0.25;
        let (mut busy, mut idle) = (0.0, 0.0);
        for ((_, f), on) in leaves.iter().zip(&seasons) {
            let duty = on.iter().filter(|&&x| x).count() as f64 / on.len().max(1) as f64;
            busy += f * duty;
            idle += f * (1.0 - duty) * off;
        }
        (
            (config.allocated_load - idle).max(0.0) / busy.max(1e-9),
            off,
        )
    };

    let mut records: Vec<TraceRecord> = Vec::new();
    let mix = config.priorities;
    let push = |records: &mut Vec<TraceRecord>,
                rng: &mut Rng,
                class: Class,
                team: &str,
                submit: Time,
                gpus: u32,
                duration: Time,
                min_runtime: Time,
                resumable: bool| {
        // Chances of high, then of normal among the rest; low otherwise.
        let (high, normal) = match (mix, class) {
            (PriorityMix::Inflated, _) => (0.8, 0.7),
            (PriorityMix::Realistic, Class::Debug) => (0.9, 0.8),
            (PriorityMix::Realistic, Class::Funded) => (0.5, 0.7),
            (PriorityMix::Realistic, Class::Sweep) => (0.1, 0.3),
        };
        let priority = if rng.chance(high) {
            2
        } else if rng.chance(normal) {
            1
        } else {
            0
        };
        let user = format!(
            "{}-u{}",
            team.rsplit('/').next().unwrap_or(team),
            rng.range(1, 4)
        );
        records.push(TraceRecord {
            id: String::new(),
            submit,
            project: team.to_string(),
            user,
            gpus,
            duration: duration.max(1),
            min_runtime,
            resumable,
            priority,
        });
    };

    for (t, (team, f)) in leaves.iter().enumerate() {
        let team_gpus = f * gpus;
        // The largest gang this team runs: its funded GPUs in whole hosts, the most it could keep
        // protected under the old scheduler's cap.
        let most_hosts = (16.0 * gpus / 1024.0).max(16.0);
        let max_nodes = ((config.gang_scale * team_gpus / f64::from(node_size)).floor())
            .clamp(1.0, most_hosts) as i64;
        let large = 0.15 * config.large_weight;
        let large_kinds = [
            (Kind::Interactive, 0.15),
            (Kind::Medium, 0.45),
            (Kind::Training, 0.25),
            (Kind::Large, large),
        ];
        let kinds: &[(Kind, f64)] = if max_nodes >= 2 {
            &large_kinds
        } else {
            &[
                (Kind::Interactive, 0.2),
                (Kind::Medium, 0.55),
                (Kind::Training, 0.25),
            ]
        };
        let weights: Vec<f64> = kinds.iter().map(|k| k.1).collect();
        let mut budget = 0.0;
        // The cluster is live when the trace starts: the last `WARM_HOURS` of work wait at 0.
        for h in -WARM_HOURS..hours {
            let on = seasons[t][h.max(0) as usize];
            budget += if on { m_on } else { m_off } * f * gpus * HOUR as f64;
            while budget > 0.0 {
                let submit = (h * HOUR + rng.range(0, HOUR - 1)).max(0);
                let (g, duration, min_runtime, resumable) = match kinds[rng.weighted(&weights)].0 {
                    Kind::Interactive => (
                        rng.range(1, 2) as u32,
                        rng.range(2 * HOUR, 12 * HOUR),
                        rng.range(2, 8) * HOUR,
                        false,
                    ),
                    Kind::Medium => (
                        [1, 1, 2, 4, 4, 8][rng.range(0, 5) as usize].min(node_size),
                        rng.log_range(HOUR, 8 * HOUR),
                        rng.range(1, 4) * 30 * 60,
                        rng.chance(0.8),
                    ),
                    Kind::Training => (
                        node_size,
                        rng.log_range(4 * HOUR, 36 * HOUR),
                        rng.range(2, 6) * HOUR,
                        rng.chance(0.95),
                    ),
                    Kind::Large => (
                        rng.range(2, max_nodes) as u32 * node_size,
                        rng.log_range(6 * HOUR, 48 * HOUR),
                        rng.range(4, 8) * HOUR,
                        true,
                    ),
                };
                budget -= f64::from(g) * duration as f64;
                push(
                    &mut records,
                    &mut rng,
                    Class::Funded,
                    team,
                    submit,
                    g,
                    duration,
                    min_runtime,
                    resumable,
                );
            }
        }
    }

    // Parked sessions: a team in season keeps a few GPUs it can reach at any time.
    for (t, (team, f)) in leaves.iter().enumerate() {
        let mut budget = 0.0;
        for h in 0..hours {
            if !seasons[t][h as usize] {
                continue;
            }
            budget += config.squat_load * f * gpus * HOUR as f64;
            while budget > 0.0 {
                let g = [1, 2, 4, 8][rng.range(0, 3) as usize].min(node_size);
                let duration = rng.range(DAY, 4 * DAY);
                budget -= f64::from(g) * duration as f64;
                let submit = h * HOUR + rng.range(0, HOUR - 1);
                push(
                    &mut records,
                    &mut rng,
                    Class::Funded,
                    team,
                    submit,
                    g,
                    duration,
                    8 * HOUR,
                    false,
                );
            }
        }
    }

    // Debug workloads: a steady stream, heavier from teams in season.
    let weights: Vec<f64> = leaves.iter().map(|l| l.1).collect();
    let per_second = config.debug_per_day * gpus / 1024.0 / DAY as f64;
    let mut at = rng.exp(1.0 / per_second);
    while (at as Time) < horizon {
        let submit = at as Time;
        let t = rng.weighted(&weights);
        let on = seasons[t][(submit / HOUR) as usize];
        if on || rng.chance(0.1) {
            let g = [1, 1, 1, 1, 2, 2, 4, 8][rng.range(0, 7) as usize].min(node_size);
            let min_runtime = [5, 10, 15][rng.range(0, 2) as usize] * 60;
            // Many crash early; the rest run a little past their minimum runtime.
            let duration = if rng.chance(0.3) {
                rng.range(30, 300)
            } else {
                min_runtime + rng.range(0, 20 * 60)
            };
            push(
                &mut records,
                &mut rng,
                Class::Debug,
                &leaves[t].0,
                submit,
                g,
                duration,
                min_runtime,
                true,
            );
        }
        at += rng.exp(1.0 / per_second);
    }

    // Free sweeps: batches of small tasks on idle GPUs, from every team.
    let mut sweep_budget = config.free_load * gpus * horizon as f64;
    while sweep_budget > 0.0 {
        let t = rng.weighted(&weights);
        let submit = rng.range(0, horizon - 1);
        // 128–512 tasks on 1,024 GPUs, fewer on a smaller cluster.
        let tasks = ((rng.range(128, 512) as f64 * gpus / 1024.0).round() as i64).max(4);
        let g = if rng.chance(0.7) { 1 } else { 2 };
        let resumable = rng.chance(0.6);
        for _ in 0..tasks {
            let duration = rng.log_range(3 * HOUR, 16 * HOUR);
            sweep_budget -= f64::from(g) * duration as f64;
            push(
                &mut records,
                &mut rng,
                Class::Sweep,
                &leaves[t].0,
                submit,
                g,
                duration,
                0,
                resumable,
            );
        }
    }

    records.retain(|r| r.submit < horizon);
    records.sort_by(|a, b| {
        (a.submit, &a.project, a.gpus, a.duration).cmp(&(b.submit, &b.project, b.gpus, b.duration))
    });
    for (i, r) in records.iter_mut().enumerate() {
        r.id = format!("w{}", i + 1);
    }

    Scenario {
        tree_toml: tree_toml(&config.shares),
        cluster_toml: cluster_toml(config, &mut rng, horizon),
        trace_csv: write_trace(&records),
    }
}

fn tree_toml(shares: &[(String, f64)]) -> String {
    let mut out = String::from("# Budget tree: path = share among its siblings.\n[shares]\n");
    let sorted: BTreeMap<&str, f64> = shares.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    for (path, share) in sorted {
        let _ = writeln!(out, "\"{path}\" = {share}");
    }
    out
}

fn cluster_toml(config: &ScenarioConfig, rng: &mut Rng, horizon: Time) -> String {
    let mut out = String::new();
    let mut names = Vec::new();
    let mut i = 0;
    while i < config.hosts.len() {
        let size = config.hosts[i];
        let count = config.hosts[i..].iter().take_while(|&&g| g == size).count();
        let _ = writeln!(
            out,
            "[[nodes]]\ncount = {count}\ngpus_per_node = {size}\nname_prefix = \"{}\"\ngpu_model = \"{}\"\n",
            config.name_prefix, config.gpu_model
        );
        i += count;
    }
    for k in 0..config.hosts.len() {
        names.push(format!("{}{k:03}", config.name_prefix));
    }
    let expected =
        config.outages_per_day * f64::from(config.days) * config.hosts.len() as f64 / 128.0;
    let mut busy: Vec<Vec<(Time, Time)>> = vec![Vec::new(); names.len()];
    let mut rows = Vec::new();
    for _ in 0..expected.round() as i64 {
        let node = rng.range(0, names.len() as i64 - 1) as usize;
        let down = rng.chance(0.25);
        let from = rng.range(0, horizon - 1);
        let length = if down {
            rng.range(HOUR / 2, 4 * HOUR)
        } else {
            rng.range(HOUR, 12 * HOUR)
        };
        let to = (from + length).min(horizon);
        if busy[node]
            .iter()
            .any(|&(a, b)| a < to + HOUR && from < b + HOUR)
        {
            continue;
        }
        busy[node].push((from, to));
        rows.push((from, node, to, down));
    }
    rows.sort();
    for (from, node, to, down) in rows {
        let _ = writeln!(
            out,
            "[[outages]]\nnode = \"{}\"\nfrom_s = {from}\nto_s = {to}\nstate = \"{}\"\n",
            names[node],
            if down { "down" } else { "unhealthy" }
        );
    }
    out
}
