//! Nodes and the agent (DESIGN §7): the server's agent API and the `hourglass agent` client.

pub mod api;
pub mod client;
pub mod gpus;
pub mod handout;
pub mod health;
pub mod output;
pub mod process;
pub mod protocol;
pub mod repo;
pub mod sampling;
pub mod state;
pub mod utilization;
