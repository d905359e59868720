#![recursion_limit = "256"]
//! The `hourglass` server: configuration, database, sign-in, the HTTP application and the CLI.
//!
//! A request enters [`build_app`]'s router, passes the session layer and [`auth::session::load_user`]
//! (which resolves the signed-in user), and reaches either an Axum handler here or a Leptos page /
//! `#[server]` function in the `app` crate, which calls back into [`backend::ServerBackend`].

pub mod admin;
pub mod agent;
pub mod api;
pub mod auth;
pub mod backend;
pub mod background;
pub mod budget;
pub mod bulk_insert;
pub mod cli;
pub mod clock;
pub mod clusters;
pub mod config;
pub mod db;
pub mod demo;
pub mod error;
pub mod guard;
pub mod http;
pub mod inbox;
pub mod lab;
pub mod loadtest;
pub mod metrics;
pub mod nodes;
pub mod reports;
pub mod runtime;
pub mod secrets;
pub mod serve;
pub mod settings;
pub mod simulate;
pub mod site;
pub mod state;
pub mod tokens;
pub mod users;
pub mod webhook;
pub mod workloads;

pub use error::ServerError;
pub use http::build_app;
pub use state::AppState;
