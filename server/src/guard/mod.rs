//! Defences against hostile requests: a same-origin check for cookie-authenticated writes
//! (CSRF), security headers on every response, and a throttle on failed sign-ins.

pub mod headers;
pub mod origin;
pub mod throttle;

pub use throttle::SignInThrottle;
