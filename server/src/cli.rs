//! Parses the command line and runs the chosen command.

use crate::config::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: could not start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let database = cli.database().to_string();
    let result = runtime.block_on(async move {
        match cli.command {
            None => crate::serve::run(&database, Default::default()).await,
            Some(Command::Serve(args)) => crate::serve::run(&database, args).await,
            Some(Command::Admin { command }) => crate::admin::run(&database, command).await,
            Some(Command::Agent(args)) => {
                crate::agent::client::run(crate::agent::client::AgentOptions {
                    state_dir: args.state_dir(),
                    server: args.server,
                    token: args.token,
                    name: args.name,
                    cluster: args.cluster,
                    gpus: args.gpus,
                    poll_s: 20,
                    health_cmd: args.health_cmd,
                    health_interval_s: args.health_interval_s,
                    sample_every_s: args.sample_every_s,
                    simulate_utilization: false,
                    ca_cert: args.ca_cert,
                })
                .await
            }
            Some(Command::Simulate(args)) => crate::simulate::run(args),
            Some(Command::Loadtest(args)) => {
                crate::loadtest::run(cli.database.as_deref(), args).await
            }
            Some(Command::LoadtestHistory(args)) => {
                crate::loadtest::history::run(cli.database.as_deref(), args).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to standard error: lines for people by default, or one JSON object per line with
/// `HOURGLASS_LOG_FORMAT=json` (for log collectors), each carrying the request's span (method,
/// path and `x-request-id`) when written while serving one. `HOURGLASS_LOG` filters them.
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("HOURGLASS_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"));
    let format = std::env::var("HOURGLASS_LOG_FORMAT").unwrap_or_default();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.trim() {
        "json" => logs.json().with_current_span(true).init(),
        "" | "text" => logs.init(),
        other => {
            logs.init();
            tracing::warn!("HOURGLASS_LOG_FORMAT={other} is neither json nor text: writing text");
        }
    }
}
