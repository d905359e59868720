//! Server tests: the real router from `build_app` on a temporary SQLite database, and a live
//! cluster (runtime + real agent processes) on loopback.

mod api;
mod auth;
mod demo;
mod governance;
mod health;
mod lab;
mod live;
mod reports;
mod restart;
mod runtime;
mod security;
mod settings;
mod support;
mod users;
