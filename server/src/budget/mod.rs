//! The budget tree in the database: nodes, versioned shares, owners and members.

pub mod changes;
pub mod impact;
pub mod import;
pub mod org_file;
pub mod people;
pub mod repo;
pub mod shares;
pub mod snapshot;
pub mod view;
