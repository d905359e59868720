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
    /// Database URL: `sqlite://path/to/file.db` or a plain file path (SQLite, created if missing), or
    /// `postgres://user:password@host:5432/database` (PostgreSQL; the database must exist).
    /// (Default: sqlite://data/hourglass.db; `loadtest`: a temporary SQLite file.)
    #[arg(long, global = true, env = "HOURGLASS_DATABASE_URL")]
    pub database: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// The database to use: the one given, else [`DEFAULT_DATABASE`].
    pub fn database(&self) -> &str {
        self.database.as_deref().unwrap_or(DEFAULT_DATABASE)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the web application (the default command).
    Serve(ServeArgs),
    /// Administer users, the budget tree, nodes and tokens directly on the database (works while a
    /// server runs on it).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Run on a GPU host: register with the server, heartbeat, and run the workloads it assigns.
    Agent(AgentArgs),
    /// Replay a workload trace through the scheduler and report (DESIGN §6); or generate inputs.
    Simulate(crate::simulate::SimulateArgs),
    /// Measure the live system at scale: a real server, simulated nodes speaking the agent
    /// protocol, submissions and readers; prints the figures, and JSON on its last line. Runs on a
    /// temporary SQLite file unless --database names an empty database.
    Loadtest(crate::loadtest::LoadArgs),
    /// Measure the reports and the retention pass on a year of generated history at scale (a
    /// temporary SQLite file unless `--database` names an empty database).
    LoadtestHistory(crate::loadtest::history::HistoryArgs),
}

#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// The server's base URL, e.g. http://scheduler.example:3000
    #[arg(long, env = "HOURGLASS_SERVER")]
    pub server: String,
    /// The node token printed by `hourglass admin register-node`.
    #[arg(long, env = "HOURGLASS_NODE_TOKEN")]
    pub token: String,
    /// The node's registered name (checked against the token).
    #[arg(long)]
    pub name: Option<String>,
    /// The cluster the node was registered in (checked against the token).
    #[arg(long)]
    pub cluster: Option<String>,
    /// How many GPUs to offer, or `auto` to read them from nvidia-smi (and check them there).
    #[arg(long, default_value = "auto")]
    pub gpus: String,
    /// Where the agent records its runs so a restarted agent re-adopts them; one per agent.
    /// Default: /var/lib/hourglass/agent as root, else ~/.local/state/hourglass/agent.
    #[arg(long, env = "HOURGLASS_AGENT_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// A health check command run every --health-interval-s: non-zero exit marks the node
    /// unhealthy, with its first output line as the reason.
    #[arg(long)]
    pub health_cmd: Option<String>,
    /// Seconds between health checks (nvidia-smi and --health-cmd).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub health_interval_s: u64,
    /// Seconds between GPU utilization samples (nvidia-smi, with --gpus auto); 0 turns them off.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub sample_every_s: u32,
    /// PEM file of CA certificates to trust for an https:// server (besides the system's).
    #[arg(long)]
    pub ca_cert: Option<PathBuf>,
}

impl AgentArgs {
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        if nix::unistd::geteuid().is_root() {
            return PathBuf::from("/var/lib/hourglass/agent");
        }
        std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(std::env::temp_dir)
            .join("hourglass/agent")
    }
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

    /// Seed a demo organisation on an empty database, run simulated GPU nodes in-process, and keep
    /// a trickle of workloads flowing.
    #[arg(long, env = "HOURGLASS_DEMO")]
    pub demo: bool,

    /// Seconds without a heartbeat before a node is marked down.
    #[arg(long, env = "HOURGLASS_HEARTBEAT_DEADLINE_S", default_value_t = 30)]
    pub heartbeat_deadline_s: i64,

    /// Seconds between SIGTERM and SIGKILL when a workload is stopped.
    #[arg(long, env = "HOURGLASS_GRACE_S", default_value_t = 10)]
    pub grace_s: i64,

    /// The Philly trace (`philly_by_vc.csv`) the simulator lab offers; not offered when unset.
    #[arg(long, env = "HOURGLASS_PHILLY_TRACE")]
    pub philly_trace: Option<PathBuf>,

    /// Reverse proxies whose `X-Forwarded-For` names the client (addresses or CIDR ranges,
    /// comma-separated), so sign-in throttling counts clients, not the proxy.
    #[arg(
        long = "trusted-proxy",
        env = "HOURGLASS_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,

    /// The URL people open (e.g. https://hourglass.example), accepted as the site's own origin
    /// when a proxy rewrites `Host`.
    #[arg(long, env = "HOURGLASS_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// A token Prometheus must send (`Authorization: Bearer …`) to read `/metrics`; without one,
    /// `/metrics` is open to whoever reaches the server.
    #[arg(long, env = "HOURGLASS_METRICS_TOKEN")]
    pub metrics_token: Option<String>,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            addr: "127.0.0.1:3000".parse().expect("valid default address"),
            site_root: PathBuf::from("target/site"),
            secure_cookies: false,
            demo: false,
            heartbeat_deadline_s: 30,
            grace_s: 10,
            philly_trace: None,
            trusted_proxies: Vec::new(),
            public_url: None,
            metrics_token: None,
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
    /// Give a user another role (researcher, leadership or admin).
    SetRole {
        #[arg(long)]
        username: String,
        #[arg(long)]
        role: String,
    },
    /// Enable a disabled user again.
    EnableUser {
        #[arg(long)]
        username: String,
    },
    /// Load the budget tree, owners and members from a TOML file ([shares], [owners], [members]).
    ImportTree {
        /// The organisation file.
        file: std::path::PathBuf,
    },
    /// Register a GPU node; prints its agent token once, alone on the last line.
    RegisterNode {
        #[arg(long)]
        name: String,
        /// The cluster it belongs to (created when new).
        #[arg(long, default_value = "default")]
        cluster: String,
    },
    /// Create a personal API token for a user; prints it once, alone on the last line.
    CreateToken {
        #[arg(long)]
        username: String,
        /// What the token is for.
        #[arg(long, default_value = "cli")]
        name: String,
    },
    /// Change a node's state: cordon, drain, mark-unhealthy or uncordon.
    Node {
        #[arg(long)]
        name: String,
        action: String,
    },
}
