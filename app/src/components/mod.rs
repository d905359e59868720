pub mod badge;
pub mod field;
pub mod shell;
