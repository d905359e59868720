pub mod detail;
pub mod list;
pub mod submit;
