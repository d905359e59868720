//! Workloads: submission, cancellation, and what a person sees of them.

pub mod domain;
pub mod estimate;
pub mod repo;
pub mod retention;
pub mod service;
