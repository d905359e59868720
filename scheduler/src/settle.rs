//! How a driver settles one moment: decide, apply, and decide again at the same time while the
//! engine says another pass could change something. The simulator and the server's runtime both
//! drive the engine through [`Settle`], so what the simulator predicts is what the server does.

use crate::reasons::Decision;

/// At most this many passes at one moment. Each pass places only what the one before requeued,
/// so chains are short; the bound only guards against a driver that never settles.
pub const MAX_PASSES_PER_MOMENT: usize = 16;

/// The passes of one moment.
///
/// ```
/// # use scheduler::*;
/// # let tree = BudgetTree::from_paths([("a", 1.0)]).unwrap();
/// # let engine = Engine::new(tree, Config::default());
/// # let nodes = [NodeState { gpus: 8, health: Health::Healthy }];
/// # let state = ClusterState { nodes: &nodes, running: &[], queued: &[], ended_debug: &[] };
/// let mut settle = Settle::new();
/// while settle.next_pass() {
///     let decision = engine.decide(&state, 0).unwrap();
///     // ... apply the decision's actions, then:
///     settle.applied(&decision);
/// }
/// assert_eq!(settle.passes(), 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settle {
    passes: usize,
    settled: bool,
}

impl Settle {
    pub fn new() -> Settle {
        Settle::default()
    }

    /// Whether to run (another) pass at this moment.
    pub fn next_pass(&self) -> bool {
        !self.settled && self.passes < MAX_PASSES_PER_MOMENT
    }

    /// Call once the pass's decision is applied.
    pub fn applied(&mut self, decision: &Decision) {
        self.passes += 1;
        self.settled = !decision.decide_again;
    }

    /// Passes run so far.
    pub fn passes(&self) -> usize {
        self.passes
    }
}
