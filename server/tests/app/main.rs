//! Server tests: the real router from `build_app` on a temporary database, and a live cluster
//! (runtime + real agent processes) on loopback. The database is a SQLite file, or a database of
//! its own on the PostgreSQL server `HOURGLASS_TEST_POSTGRES_URL` names (`support::TestDb`).

mod activity;
mod agent;
mod api;
mod auth;
mod clusters;
mod delivery;
mod demo;
mod faults;
mod governance;
mod health;
mod inbox;
mod lab;
mod live;
mod load;
mod logs;
mod metrics;
mod people;
mod pool;
mod render;
mod replicas;
mod reports;
mod restart;
mod retention;
mod runtime;
mod security;
mod settings;
mod shares;
mod simulate;
mod snapshot;
mod storage;
mod support;
mod users;
mod utilization;
mod webhook;
