//! Change requests (DESIGN §3): propose new shares for a node's children, decide as an owner,
//! never approve your own, never apply over newer shares, apply scheduled ones at their time;
//! the proposer may withdraw a waiting request or rebase a stale one onto today's shares.
//!
//! `policy` holds the rules (pure), `repo` every query, `service` the operations.

pub mod policy;
pub mod repo;
pub mod service;

pub use policy::Proposal;
pub use service::{apply_due, decide, get, list, propose, rebase, withdraw};
