pub mod badge;
pub mod chart;
pub mod copy;
pub mod field;
pub mod gantt;
pub mod shell;
pub mod sparkline;
pub mod tree_toggle;
