//! The engine's integration tests: one binary, a module per part of DESIGN §4.

mod audit;
mod baseline;
mod changes;
mod fair_share;
mod fast_lane;
mod health;
mod placement;
mod properties;
mod shortcuts;
mod simulator;
mod slurm;
mod support;
mod validation;
