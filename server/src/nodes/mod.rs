//! GPU hosts: registration, heartbeats, health.

pub mod repo;
pub mod service;
