//! People: who they are, how they prove it, what they may do.

pub mod domain;
pub mod repo;
pub mod service;
