//! Reports read the pre-aggregated hourly ledger (DESIGN §5 measures): the quarterly review and
//! usage series for a node's subtree.

pub mod activity;
pub mod activity_hours;
pub mod activity_rollup;
pub mod calendar;
pub mod csv_out;
pub mod people;
pub mod repo;
pub mod review;
pub mod rollup;
pub mod trend;
pub mod usage;
pub mod waits;
