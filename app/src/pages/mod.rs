pub mod home;
pub mod login;
pub mod not_found;
pub mod users;
