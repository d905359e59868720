//! `hourglass admin …`: user administration straight on the database.

use crate::{config::AdminCommand, db, users::service, ServerError};
use std::io::BufRead;

pub async fn run(database: &str, command: AdminCommand) -> Result<(), ServerError> {
    let pool = db::open(database).await?;
    match command {
        AdminCommand::CreateUser {
            username,
            role,
            password_stdin: _,
        } => {
            let password = read_password()?;
            let user = service::create_user(&pool, &username, &role, password).await?;
            println!("Created user {} ({}).", user.username, user.role.label());
        }
        AdminCommand::ResetPassword {
            username,
            password_stdin: _,
        } => {
            let password = read_password()?;
            let user = service::reset_password(&pool, &username, password).await?;
            println!("Password reset for {}.", user.username);
        }
        AdminCommand::DisableUser { username } => {
            let user = service::set_disabled_by_username(&pool, &username, true).await?;
            println!(
                "Disabled {}; their sessions end on their next request.",
                user.username
            );
        }
        AdminCommand::EnableUser { username } => {
            let user = service::set_disabled_by_username(&pool, &username, false).await?;
            println!("Enabled {}.", user.username);
        }
    }
    pool.close().await;
    Ok(())
}

/// One line from standard input, without its line ending.
fn read_password() -> Result<String, ServerError> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        return Err(ServerError::invalid(
            "password",
            "no password on standard input (pipe one line)",
        ));
    }
    Ok(password)
}
