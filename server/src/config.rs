//! Configuration: one typed struct per command, from flags with environment fallbacks.

use clap::{Args, Parser, Subcommand};
use std::{net::SocketAddr, path::PathBuf};

pub const DEFAULT_DATABASE: &str = "sqlite://data/hourglass.db";

#[derive(Debug, Parser)]
#[command(
    name = "hourglass",
    version,
    about = "Govern GPU time on a shared cluster and schedule work on it."
)]
pub struct Cli {
    /// Database URL (`sqlite://path/to/file.db`) or a plain SQLite file path; created if missing.
    #[arg(long, global = true, env = "HOURGLASS_DATABASE_URL", default_value = DEFAULT_DATABASE)]
    pub database: String,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the web application (the default command).
    Serve(ServeArgs),
    /// Administer users directly on the database (works while a server runs on it).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "HOURGLASS_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// The built site (the folder holding `pkg/`), so the binary runs from anywhere.
    #[arg(long, env = "HOURGLASS_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,

    /// Mark the session cookie `Secure` (set when the site is served over HTTPS).
    #[arg(long, env = "HOURGLASS_SECURE_COOKIES")]
    pub secure_cookies: bool,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            addr: "127.0.0.1:3000".parse().expect("valid default address"),
            site_root: PathBuf::from("target/site"),
            secure_cookies: false,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a user; the password is read from standard input.
    CreateUser {
        #[arg(long)]
        username: String,
        /// researcher, leadership or admin.
        #[arg(long, default_value = "researcher")]
        role: String,
        /// Read the password from standard input (one line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Set a new password for a user; the password is read from standard input.
    ResetPassword {
        #[arg(long)]
        username: String,
        /// Read the password from standard input (one line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Disable a user: they can no longer sign in and their sessions end.
    DisableUser {
        #[arg(long)]
        username: String,
    },
    /// Enable a disabled user again.
    EnableUser {
        #[arg(long)]
        username: String,
    },
}
