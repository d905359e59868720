pub mod home;
pub mod login;
pub mod nodes;
pub mod not_found;
pub mod queue;
pub mod tokens;
pub mod users;
pub mod workloads;
