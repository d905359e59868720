//! Defences against hostile requests: a same-origin check for cookie-authenticated writes
//! (CSRF), security headers on every response, a throttle on failed sign-ins, and a size limit on
//! every request body.

pub mod body_limit;
pub mod client;
pub mod headers;
pub mod origin;
pub mod repo;
pub mod throttle;
