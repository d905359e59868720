//! People as the Users page sees them (the DTOs live in `model`, shared with the session).

pub mod api;

pub use crate::model::{NewUser, Role, UserSummary};
