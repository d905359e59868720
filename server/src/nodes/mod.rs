//! GPU hosts: registration, heartbeats, health.

pub mod heartbeats;
pub mod repo;
pub mod service;
