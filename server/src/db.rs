//! Connecting to and migrating the database.

use crate::ServerError;
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};
use std::{path::Path, str::FromStr, time::Duration};
use tower_sessions_sqlx_store::SqliteStore;

/// Opens the SQLite database `url` names (a `sqlite:` URL or a plain file path), creating the file
/// and its folder if missing, in WAL mode so the CLI can write while a server runs on it.
pub async fn connect(url: &str) -> Result<SqlitePool, ServerError> {
    let options = sqlite_options(url)?;
    if let Some(parent) = options.get_filename().parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|error| {
                ServerError::Config(format!(
                    "cannot create the database folder {}: {error}",
                    parent.display()
                ))
            })?;
        }
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .map_err(|error| ServerError::Config(format!("cannot open the database {url}: {error}")))?;
    Ok(pool)
}

fn sqlite_options(url: &str) -> Result<SqliteConnectOptions, ServerError> {
    let options = if url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(url)
            .map_err(|error| ServerError::Config(format!("invalid database URL {url}: {error}")))?
    } else if url.contains("://") {
        return Err(ServerError::Config(format!(
            "unsupported database URL {url}: use sqlite://path/to/file.db or a file path"
        )));
    } else {
        SqliteConnectOptions::new().filename(Path::new(url))
    };
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10)))
}

/// Applies the app's migrations and the session store's table. Two processes opening a new
/// database at once (a server and an admin command) may race: each migration runs in its own
/// transaction, so the loser's attempt rolls back and a retry finds it applied.
pub async fn migrate(pool: &SqlitePool) -> Result<(), ServerError> {
    let mut attempt = 0;
    loop {
        match sqlx::migrate!("../migrations").run(pool).await {
            Ok(()) => break,
            Err(error) if attempt < 20 => {
                attempt += 1;
                tracing::debug!(%error, attempt, "migration raced another process; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
    SqliteStore::new(pool.clone()).migrate().await?;
    Ok(())
}

/// Connects and migrates: what every command does first.
pub async fn open(url: &str) -> Result<SqlitePool, ServerError> {
    let pool = connect(url).await?;
    migrate(&pool).await?;
    Ok(pool)
}
