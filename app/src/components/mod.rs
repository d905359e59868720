pub mod field;
pub mod shell;
