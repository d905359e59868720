//! `hourglass admin …`: user administration straight on the database.

use crate::{
    budget::{import::import_org, org_file::OrgFile},
    config::AdminCommand,
    db,
    nodes::service as node_service,
    tokens::service as tokens,
    users::service,
    ServerError,
};
use std::io::BufRead;

pub async fn run(database: &str, command: AdminCommand) -> Result<(), ServerError> {
    let pool = db::open(database).await?;
    let now = crate::clock::Clock::system().now();
    match command {
        AdminCommand::CreateUser {
            username,
            role,
            password_stdin: _,
        } => {
            let password = read_password()?;
            let user = service::create_user(&pool, &username, &role, password, now).await?;
            println!("Created user {} ({}).", user.username, user.role.label());
        }
        AdminCommand::ResetPassword {
            username,
            password_stdin: _,
        } => {
            let password = read_password()?;
            let user = service::reset_password(&pool, &username, password, now).await?;
            println!("Password reset for {}.", user.username);
        }
        AdminCommand::DisableUser { username } => {
            let user = service::set_disabled_by_username(&pool, &username, true, now).await?;
            println!(
                "Disabled {}; their sessions end on their next request.",
                user.username
            );
        }
        AdminCommand::SetRole { username, role } => {
            let user = service::set_role_by_username(&pool, &username, &role, now).await?;
            println!("{} is now {}.", user.username, user.role.label());
        }
        AdminCommand::EnableUser { username } => {
            let user = service::set_disabled_by_username(&pool, &username, false, now).await?;
            println!("Enabled {}.", user.username);
        }
        AdminCommand::ImportTree { file } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| ServerError::Config(format!("cannot read {}: {e}", file.display())))?;
            let org = OrgFile::parse(&text)
                .map_err(|e| ServerError::Config(format!("{}: {e}", file.display())))?;
            let summary = import_org(&pool, &org, now).await?;
            println!(
                "Imported {}: {} nodes created, {} reshared, {} unchanged.",
                file.display(),
                summary.created,
                summary.reshared,
                summary.unchanged
            );
        }
        AdminCommand::RegisterNode { name, cluster } => {
            let (node, token) =
                node_service::register_node(&pool, &name, Some(cluster.as_str()), now).await?;
            println!(
                "Registered node {} in cluster {}. Start its agent with:",
                node.name, node.cluster
            );
            println!(
                "  hourglass agent --server URL --name {} --cluster {} --gpus auto --token TOKEN",
                node.name, node.cluster
            );
            println!("The token (shown once):");
            println!("{token}");
        }
        AdminCommand::CreateToken { username, name } => {
            let user = crate::users::repo::find_user_by_username(&pool, username.trim())
                .await?
                .filter(|u| !u.disabled)
                .ok_or_else(|| {
                    ServerError::NotFound(format!("There is no active user named \"{username}\"."))
                })?;
            let token = tokens::create_token(&pool, user.user_id, &name, now).await?;
            println!(
                "API token \"{}\" for {} (shown once; use it as `Authorization: Bearer …`):",
                name.trim(),
                user.username
            );
            println!("{token}");
        }
        AdminCommand::Node { name, action } => {
            let action = node_service::parse_action(&action)?;
            let node = node_service::set_admin_state(&pool, &name, action).await?;
            // A server on this database decides with it at once, not at its next reading.
            crate::runtime::lease::bump_wake(&pool).await?;
            println!("Node {} is now {}.", node.name, node.health());
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
