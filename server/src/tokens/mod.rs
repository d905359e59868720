//! Personal API tokens for scripts.

pub mod repo;
pub mod service;
