//! Fair-Tree ranking (DESIGN §4.2–4.3) and the damping rule that decides who may preempt whom.
//!
//! Siblings are ordered by a *rank ratio*: the week's ratio (§4.2) blended with the same ratio
//! over the last hours ([`Recent`]), so that a leaf which has just had its share for hours
//! yields the next free GPUs to an equally served sibling that has not, instead of both taking
//! turns by the day. Measured across the scenario family (README), hourly tracking rises by
//! 3–14 points with delivered/owed over the month nearly unchanged. Preemption is not affected:
//! who may preempt whom still compares the week's ratios with the damping margin, so the short
//! window decides who is handed GPUs first, not whose running work may be taken.

use crate::ids::{BudgetId, Time};
use crate::ledger::Ledger;
use crate::tree::BudgetTree;

/// Every node's usage, allocation and ratio at one moment, and the leaves in Fair-Tree order.
#[derive(Clone, Debug, Default)]
pub struct Standings {
    pub(crate) at: Time,
    usage: Vec<f64>,
    allocated: Vec<f64>,
    ratio: Vec<f64>,
    /// `usage / allocated` over the recent window (see [`Recent`]).
    recent: Vec<f64>,
    /// What siblings are ordered by: `ratio` blended with `recent`.
    rank_ratio: Vec<f64>,
    /// Position among siblings (0 = best) for every node but the root.
    sibling_rank: Vec<u32>,
    sibling_count: Vec<u32>,
    /// For each node, the range of leaf ranks its subtree occupies.
    rank_range: Vec<(u32, u32)>,
    leaves: Vec<BudgetId>,
    leaf_rank: Vec<u32>,
    /// Every leaf's path from the root's child down to the leaf, one after another by leaf
    /// rank (one list, not one per leaf: standings are worked out at every pass).
    paths: Vec<BudgetId>,
    /// Where each leaf rank's path starts in `paths`; its end is the next one's start.
    path_at: Vec<u32>,
    /// Room kept for working them out again: the recent window's allocations, the path walked,
    /// and the children being ordered at each level of the walk.
    scratch: Vec<f64>,
    path: Vec<BudgetId>,
    kids: Vec<BudgetId>,
}

/// Where two leaves' paths part, and each side's ratio there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelComparison {
    /// The waiting (or preempting) workload's side.
    pub ours: BudgetId,
    pub our_ratio: f64,
    /// The other workload's side.
    pub theirs: BudgetId,
    pub their_ratio: f64,
}

/// The recent window whose ratio is blended into the rank ratio, and its weight (0: the rank
/// ratio is the week's ratio, DESIGN §4.2 exactly).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recent {
    /// No longer than the ledger's window (it is cut to it).
    pub window: Time,
    /// In `[0, 1]`.
    pub weight: f64,
}

impl Recent {
    /// The week's ratio alone.
    pub const OFF: Recent = Recent {
        window: 0,
        weight: 0.0,
    };
}

impl Standings {
    /// Computes ratios from the ledger at `now` and ranks the tree by the week's ratios alone.
    pub fn compute(tree: &BudgetTree, ledger: &Ledger, now: Time) -> Standings {
        Standings::compute_with(tree, ledger, now, Recent::OFF)
    }

    /// Computes ratios from the ledger at `now` and ranks the tree by the week's ratio blended
    /// with the recent window's.
    pub fn compute_with(
        tree: &BudgetTree,
        ledger: &Ledger,
        now: Time,
        recent: Recent,
    ) -> Standings {
        let mut standings = Standings::default();
        standings.recompute(tree, ledger, now, recent);
        standings
    }

    /// [`Standings::compute_with`] in place, reusing these standings' lists: a pass works them
    /// out at every event.
    pub(crate) fn recompute(
        &mut self,
        tree: &BudgetTree,
        ledger: &Ledger,
        now: Time,
        recent: Recent,
    ) {
        self.at = now;
        ledger.allocated_all_into(tree, now, ledger.config().window, &mut self.allocated);
        self.usage.clear();
        self.usage
            .extend(tree.ids().map(|id| ledger.usage(id, now)));
        let funded = tree.version_at(now);
        let (usage, allocated) = (&self.usage, &self.allocated);
        self.ratio.clear();
        self.ratio.extend(tree.ids().map(|id| {
            ratio(
                usage[id.index()],
                allocated[id.index()],
                funded.fraction(id),
            )
        }));
        let weight = recent.weight.clamp(0.0, 1.0);
        if weight > 0.0 && recent.window > 0 {
            let allocated_recent = &mut self.scratch;
            ledger.allocated_all_into(tree, now, recent.window, allocated_recent);
            self.recent.clear();
            self.recent.extend(tree.ids().map(|id| {
                self::ratio(
                    ledger.usage_within(id, now, recent.window),
                    allocated_recent[id.index()],
                    funded.fraction(id),
                )
            }));
            self.rank_ratio.clear();
            self.rank_ratio
                .extend(self.ratio.iter().zip(&self.recent).map(|(&week, &recent)| {
                    if week.is_finite() && recent.is_finite() {
                        (1.0 - weight) * week + weight * recent
                    } else {
                        week
                    }
                }));
        } else {
            self.recent.clone_from(&self.ratio);
            self.rank_ratio.clone_from(&self.ratio);
        }
        let n = tree.len();
        let refill = |v: &mut Vec<u32>, value: u32| {
            v.clear();
            v.resize(n, value);
        };
        refill(&mut self.sibling_rank, 0);
        refill(&mut self.sibling_count, 1);
        refill(&mut self.leaf_rank, u32::MAX);
        self.rank_range.clear();
        self.rank_range.resize(n, (0, 0));
        self.leaves.clear();
        self.paths.clear();
        self.path_at.clear();
        self.path_at.push(0);
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        self.rank_subtree(tree, BudgetId::ROOT, now, &mut path);
        self.path = path;
    }

    fn rank_subtree(
        &mut self,
        tree: &BudgetTree,
        node: BudgetId,
        now: Time,
        path: &mut Vec<BudgetId>,
    ) {
        let lo = self.leaves.len() as u32;
        if tree.is_leaf(node) {
            self.leaf_rank[node.index()] = lo;
            self.leaves.push(node);
            self.paths.extend_from_slice(path);
            self.path_at.push(self.paths.len() as u32);
        } else {
            let shares = tree.version_at(now);
            // The children in order, on a stack shared by every level of the walk.
            let from = self.kids.len();
            self.kids.extend_from_slice(tree.children(node));
            let rank_ratio = &self.rank_ratio;
            self.kids[from..].sort_by(|&a, &b| {
                rank_ratio[a.index()]
                    .total_cmp(&rank_ratio[b.index()])
                    .then_with(|| shares.share(b).total_cmp(&shares.share(a)))
                    .then_with(|| tree.name(a).cmp(tree.name(b)))
            });
            let count = self.kids.len() - from;
            for i in 0..count {
                let kid = self.kids[from + i];
                self.sibling_rank[kid.index()] = i as u32;
                self.sibling_count[kid.index()] = count as u32;
                path.push(kid);
                self.rank_subtree(tree, kid, now, path);
                path.pop();
            }
            self.kids.truncate(from);
        }
        self.rank_range[node.index()] = (lo, self.leaves.len() as u32);
    }

    /// The moment these standings describe.
    pub fn at(&self) -> Time {
        self.at
    }

    /// GPU-seconds charged to the node in the window.
    pub fn usage(&self, node: BudgetId) -> f64 {
        self.usage[node.index()]
    }

    /// GPU-seconds the node was funded for in the window.
    pub fn allocated(&self, node: BudgetId) -> f64 {
        self.allocated[node.index()]
    }

    /// `usage / allocated`; below 1 is under-served. With nothing allocated in the window, a funded
    /// node that used nothing is at 0, and anything else is at +∞ (unfunded work ranks last).
    pub fn ratio(&self, node: BudgetId) -> f64 {
        self.ratio[node.index()]
    }

    /// The same ratio over the recent window only (the week's when the blend is off).
    pub fn recent_ratio(&self, node: BudgetId) -> f64 {
        self.recent[node.index()]
    }

    /// What the node is ordered among its siblings by: the week's ratio blended with the recent
    /// window's.
    pub fn rank_ratio(&self, node: BudgetId) -> f64 {
        self.rank_ratio[node.index()]
    }

    /// 0-based position among its siblings, and how many siblings (itself included) there are.
    pub fn sibling_rank(&self, node: BudgetId) -> (u32, u32) {
        (
            self.sibling_rank[node.index()],
            self.sibling_count[node.index()],
        )
    }

    /// Leaves best first: Fair-Tree order.
    pub fn leaves(&self) -> &[BudgetId] {
        &self.leaves
    }

    /// The leaf's 0-based rank (`u32::MAX` for inner nodes).
    pub fn leaf_rank(&self, leaf: BudgetId) -> u32 {
        self.leaf_rank[leaf.index()]
    }

    pub(crate) fn leaf_count(&self) -> usize {
        self.leaves.len()
    }

    /// The leaf's path from the root's child down to it.
    fn path(&self, leaf: BudgetId) -> &[BudgetId] {
        let rank = self.leaf_rank(leaf) as usize;
        &self.paths[self.path_at[rank] as usize..self.path_at[rank + 1] as usize]
    }

    /// Where the paths to two different leaves part (`None` for the same leaf).
    pub fn split(&self, ours: BudgetId, theirs: BudgetId) -> Option<LevelComparison> {
        let a = self.path(ours);
        let b = self.path(theirs);
        let (x, y) = a.iter().zip(b).find(|(x, y)| x != y)?;
        Some(LevelComparison {
            ours: *x,
            our_ratio: self.ratio(*x),
            theirs: *y,
            their_ratio: self.ratio(*y),
        })
    }

    /// Whether work of `waiting` may preempt unprotected work of `running` (DESIGN §4.5–4.6): at the
    /// level where their paths part, the running side's ratio must exceed the waiting side's by
    /// more than `margin`. Equal and near-equal leaves never preempt each other.
    pub fn may_preempt(&self, waiting: BudgetId, running: BudgetId, margin: f64) -> bool {
        self.split(waiting, running)
            .is_some_and(|s| s.their_ratio > s.our_ratio + margin)
    }

    /// [`Standings::may_preempt`] for every leaf at once, indexed by leaf rank: O(leaves).
    #[cfg(test)]
    pub(crate) fn preemptible_by(
        &self,
        waiting: BudgetId,
        margin: f64,
        tree: &BudgetTree,
    ) -> Vec<bool> {
        let mut out = vec![false; self.leaves.len()];
        self.preemptible_ranges(waiting, margin, tree, |lo, hi| {
            out[lo as usize..hi as usize].fill(true);
        });
        out
    }

    /// [`Standings::preemptible_by`] as ranges of leaf ranks, `lo..hi`, each given to `range`.
    pub(crate) fn preemptible_ranges(
        &self,
        waiting: BudgetId,
        margin: f64,
        tree: &BudgetTree,
        mut range: impl FnMut(u32, u32),
    ) {
        let path = self.path(waiting);
        let mut parent = BudgetId::ROOT;
        for &ours in path {
            for &sibling in tree.children(parent) {
                if sibling != ours && self.ratio(sibling) > self.ratio(ours) + margin {
                    let (lo, hi) = self.rank_range[sibling.index()];
                    range(lo, hi);
                }
            }
            parent = ours;
        }
    }
}

pub(crate) fn ratio(usage: f64, allocated: f64, fraction_now: f64) -> f64 {
    if allocated > 0.0 {
        usage / allocated
    } else if usage <= 0.0 && fraction_now > 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DAY, HOUR};
    use crate::ledger::LedgerConfig;

    fn setup() -> (BudgetTree, Ledger) {
        let tree = BudgetTree::from_paths([
            ("a", 1.0),
            ("a/a1", 1.0),
            ("a/a2", 1.0),
            ("b", 1.0),
            ("b/b1", 1.0),
            ("b/b2", 1.0),
        ])
        .unwrap();
        let mut ledger = Ledger::new(&tree, LedgerConfig::default());
        ledger.set_capacity(-7 * DAY, 100);
        (tree, ledger)
    }

    #[test]
    fn under_served_program_outranks_over_served_one_before_projects_are_compared() {
        let (tree, mut ledger) = setup();
        let id = |p: &str| tree.find(p).unwrap();
        // b1 is the least-served project, but program b as a whole used more than a.
        ledger.charge(id("a/a1"), -DAY, 0, 20_000_000.0);
        ledger.charge(id("b/b2"), -DAY, 0, 30_000_000.0);
        let s = Standings::compute(&tree, &ledger, 0);
        let order: Vec<&str> = s.leaves().iter().map(|&l| tree.path(l)).collect();
        assert_eq!(order, ["a/a2", "a/a1", "b/b1", "b/b2"]);
        assert!(s.ratio(id("b/b1")) < s.ratio(id("a/a1")));
    }

    #[test]
    fn standings_worked_out_again_in_place_read_as_ones_worked_out_afresh() {
        let (tree, mut ledger) = setup();
        let id = |p: &str| tree.find(p).unwrap();
        let recent = Recent {
            window: 2 * HOUR,
            weight: 0.15,
        };
        ledger.charge(id("a/a1"), -DAY, 0, 20_000_000.0);
        let mut kept = Standings::compute_with(&tree, &ledger, 0, recent);
        // Later, with the order changed: b2 used the most since.
        ledger.charge(id("b/b2"), 0, HOUR, 90_000_000.0);
        ledger.charge(id("a/a2"), 0, HOUR, 1_000_000.0);
        kept.recompute(&tree, &ledger, HOUR, recent);
        let fresh = Standings::compute_with(&tree, &ledger, HOUR, recent);
        assert_eq!(kept.at(), fresh.at());
        assert_eq!(kept.leaves(), fresh.leaves());
        assert_ne!(kept.leaves()[3], id("a/a1"), "the order changed");
        for node in tree.ids() {
            assert_eq!(kept.usage(node), fresh.usage(node));
            assert_eq!(kept.allocated(node), fresh.allocated(node));
            assert_eq!(kept.ratio(node), fresh.ratio(node));
            assert_eq!(kept.recent_ratio(node), fresh.recent_ratio(node));
            assert_eq!(kept.rank_ratio(node), fresh.rank_ratio(node));
            assert_eq!(kept.leaf_rank(node), fresh.leaf_rank(node));
            if node != BudgetId::ROOT {
                assert_eq!(kept.sibling_rank(node), fresh.sibling_rank(node));
            }
        }
        for &leaf in fresh.leaves() {
            assert_eq!(kept.path(leaf), fresh.path(leaf));
            assert_eq!(
                kept.preemptible_by(leaf, 0.1, &tree),
                fresh.preemptible_by(leaf, 0.1, &tree)
            );
        }
    }

    #[test]
    fn a_leaf_that_just_had_its_share_yields_to_an_equally_served_sibling_that_did_not() {
        let (tree, mut ledger) = setup();
        let id = |p: &str| tree.find(p).unwrap();
        // Over the week both used the same; a1 used its share in the last two hours, a2 a day ago.
        ledger.charge(id("a/a1"), -2 * HOUR, 0, 1_000_000.0);
        ledger.charge(id("a/a2"), -DAY - 2 * HOUR, -DAY, 1_000_000.0);
        let recent = Recent {
            window: 2 * HOUR,
            weight: 0.15,
        };
        let week = Standings::compute(&tree, &ledger, 0);
        let blended = Standings::compute_with(&tree, &ledger, 0, recent);
        let order = |s: &Standings| -> Vec<String> {
            s.leaves()
                .iter()
                .map(|&l| tree.path(l).to_string())
                .filter(|p| p.starts_with("a/"))
                .collect()
        };
        // The week alone cannot tell them apart (ties go by name); the recent window can.
        assert_eq!(order(&week), ["a/a1", "a/a2"]);
        assert_eq!(order(&blended), ["a/a2", "a/a1"]);
        assert_eq!(blended.ratio(id("a/a1")), blended.ratio(id("a/a2")));
        assert!(blended.recent_ratio(id("a/a1")) > 1.0);
        assert_eq!(blended.recent_ratio(id("a/a2")), 0.0);
        let expected = 0.85 * blended.ratio(id("a/a1")) + 0.15 * blended.recent_ratio(id("a/a1"));
        assert!((blended.rank_ratio(id("a/a1")) - expected).abs() < 1e-12);
        // Preemption still compares the week's ratios: equal, so neither may preempt the other.
        assert!(!blended.may_preempt(id("a/a2"), id("a/a1"), 0.02));
    }

    #[test]
    fn ties_rank_larger_share_first_then_name() {
        let tree = BudgetTree::from_paths([("z", 2.0), ("y", 1.0), ("x", 1.0)]).unwrap();
        let ledger = Ledger::new(&tree, LedgerConfig::default());
        let s = Standings::compute(&tree, &ledger, 0);
        let order: Vec<&str> = s.leaves().iter().map(|&l| tree.path(l)).collect();
        assert_eq!(order, ["z", "x", "y"]);
    }

    #[test]
    fn damping_compares_ratios_where_the_paths_part() {
        let (tree, mut ledger) = setup();
        let id = |p: &str| tree.find(p).unwrap();
        ledger.charge(id("a/a1"), -DAY, 0, 21_000_000.0);
        ledger.charge(id("b/b1"), -DAY, 0, 20_000_000.0);
        let s = Standings::compute(&tree, &ledger, 0);
        // Programs a and b are within 0.05 of each other: neither side may preempt the other.
        assert!(!s.may_preempt(id("b/b2"), id("a/a1"), 0.05));
        assert!(s.may_preempt(id("b/b2"), id("a/a1"), 0.0));
        // Inside a, a2 used nothing and a1 a lot: far apart.
        assert!(s.may_preempt(id("a/a2"), id("a/a1"), 0.05));
        let by_rank = s.preemptible_by(id("a/a2"), 0.05, &tree);
        let expected: Vec<bool> = s
            .leaves()
            .iter()
            .map(|&l| s.may_preempt(id("a/a2"), l, 0.05))
            .collect();
        assert_eq!(by_rank, expected);
    }
}
