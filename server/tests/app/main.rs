//! Server tests: the real router from `build_app` on a temporary SQLite database.

mod auth;
mod health;
mod support;
mod users;
