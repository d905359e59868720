//! Sign-in: password hashing and the session.

pub mod password;
pub mod session;
