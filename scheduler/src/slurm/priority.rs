//! SLURM's multifactor job priority with the Fair Tree fair-share factor.
//!
//! - <https://slurm.schedmd.com/priority_multifactor.html>: `priority = Σ weight × factor`, each
//!   factor in [0, 1], the sum truncated to an integer; ties go to the earlier submission, then
//!   the lower job id. Age: time queued over `PriorityMaxAge` (7 days by default), saturating.
//!   Job size: GPUs asked for over the cluster's (`PriorityFavorSmall=NO`, the default). QOS: the
//!   job's QOS priority over the largest (here scavenger 0, normal 0.5, debug 1).
//! - <https://slurm.schedmd.com/fair_tree.html>: siblings are sorted by Level Fairshare
//!   `LF = S / U` (share among siblings over decayed usage among siblings), highest first, and
//!   the tree is walked depth first; the n-th user (leaf) reached gets rank `leaves - n + 1`, and its
//!   fair-share factor is `rank / leaves`. Sibling users with equal LF share a rank; users with no
//!   shares get 0. (Simplified: sibling *accounts* with equal LF are walked in tree order instead
//!   of having their children merged.)

use crate::engine::Engine;
use crate::ids::{BudgetId, Time};

use super::book::Job;
use super::SlurmConfig;

/// Every leaf's Fair Tree factor at `now`, by budget id (0 for inner nodes).
pub(crate) fn fair_tree_factors(engine: &Engine, now: Time) -> Vec<f64> {
    let tree = engine.tree();
    let leaves = tree.leaves().count();
    let mut walk = Walk {
        engine,
        now,
        leaves,
        next_rank: leaves,
        factors: vec![0.0; tree.len()],
    };
    if leaves > 0 {
        walk.visit(BudgetId::ROOT);
    }
    walk.factors
}

struct Walk<'a> {
    engine: &'a Engine,
    now: Time,
    leaves: usize,
    next_rank: usize,
    factors: Vec<f64>,
}

impl Walk<'_> {
    /// Usage per share: ascending is LF descending (the siblings' sums cancel). No share: last.
    fn per_share(&self, node: BudgetId) -> f64 {
        let f = self.engine.tree().version_at(self.now).fraction(node);
        if f > 0.0 {
            self.engine.ledger().decayed_usage(node, self.now) / f
        } else {
            f64::INFINITY
        }
    }

    fn visit(&mut self, node: BudgetId) {
        let tree = self.engine.tree();
        let mut children: Vec<(f64, BudgetId)> = tree
            .children(node)
            .iter()
            .map(|&c| (self.per_share(c), c))
            .collect();
        children.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut i = 0;
        while i < children.len() {
            let (lf, c) = children[i];
            if !tree.is_leaf(c) {
                self.visit(c);
                i += 1;
                continue;
            }
            // Consecutive sibling users with equal LF share one rank.
            let mut j = i;
            while j < children.len() && children[j].0 == lf && tree.is_leaf(children[j].1) {
                j += 1;
            }
            let factor = if lf.is_finite() {
                self.next_rank as f64 / self.leaves as f64
            } else {
                0.0
            };
            for &(_, leaf) in &children[i..j] {
                self.factors[leaf.index()] = factor;
            }
            self.next_rank -= j - i;
            i = j;
        }
    }
}

/// The integer priority SLURM gives each job at one moment: the weights folded into per-pass
/// constants, so a job costs a few additions.
#[derive(Clone)]
pub(crate) struct Priorities {
    now: Time,
    /// `PriorityWeightFairshare × factor`, by budget id.
    fair_share: Vec<f64>,
    age_per_second: f64,
    age_most: f64,
    size_per_gpu: f64,
    size_most: f64,
    /// By QOS: scavenger, normal, debug.
    qos: [f64; 3],
}

impl Priorities {
    pub(crate) fn new(engine: &Engine, now: Time, cluster_gpus: u32, config: &SlurmConfig) -> Self {
        let weight = |w: u32| f64::from(w);
        Priorities {
            now,
            fair_share: fair_tree_factors(engine, now)
                .into_iter()
                .map(|f| weight(config.weight_fairshare) * f)
                .collect(),
            age_per_second: weight(config.weight_age) / config.max_age.max(1) as f64,
            age_most: weight(config.weight_age),
            size_per_gpu: weight(config.weight_job_size) / f64::from(cluster_gpus.max(1)),
            size_most: weight(config.weight_job_size),
            qos: [
                0.0,
                0.5 * weight(config.weight_qos),
                weight(config.weight_qos),
            ],
        }
    }

    pub(crate) fn of(&self, w: &Job) -> u64 {
        let age =
            ((self.now - w.submitted_at).max(0) as f64 * self.age_per_second).min(self.age_most);
        let size = (f64::from(w.gpus) * self.size_per_gpu).min(self.size_most);
        let qos = if w.is_scavenger() {
            0
        } else if w.is_debug() {
            2
        } else {
            1
        };
        // Every term is at least 0 and the sum far below 2^63: a signed conversion gives the
        // same integer as an unsigned one, in fewer instructions.
        (self.fair_share[w.leaf.index()] + age + size + self.qos[qos]) as i64 as u64
    }
}
