//! Nodes and the agent (DESIGN §7): the server's agent API and the `hourglass agent` client.

pub mod api;
pub mod client;
pub mod gpus;
pub mod protocol;
