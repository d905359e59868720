//! Connecting to and migrating the database: SQLite (a file, the default) or PostgreSQL, chosen by
//! the URL's scheme. Everything else in the server speaks one portable SQL through `sqlx::Any`;
//! what differs between the engines (connection settings, migrations, write transactions, the
//! session store) lives here.

use crate::ServerError;
use sqlx::{
    any::{AnyConnectOptions, AnyPoolOptions},
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    Any, AnyPool, ConnectOptions, Connection, Decode, Executor, Transaction, Type,
};
use std::{path::Path, str::FromStr, time::Duration};
use tower_sessions::{
    session::{Id, Record},
    session_store, ExpiredDeletion,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// The two database engines Hourglass runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Which engine a pool from [`connect`] talks to.
pub fn engine(pool: &AnyPool) -> Engine {
    match pool.connect_options().database_url.scheme() {
        "postgres" | "postgresql" => Engine::Postgres,
        _ => Engine::Sqlite,
    }
}

/// What a database URL names, parsed.
enum Target {
    Sqlite(SqliteConnectOptions),
    Postgres(PgConnectOptions),
}

/// `url` with any password replaced, for messages and logs.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{path}")
        }
        _ => url.to_string(),
    }
}

fn target(url: &str) -> Result<Target, ServerError> {
    let invalid = |error: sqlx::Error| {
        ServerError::Config(format!("invalid database URL {}: {error}", redacted(url)))
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Target::Postgres(
            PgConnectOptions::from_str(url).map_err(invalid)?,
        ));
    }
    if url.contains(":memory:") || url.contains("mode=memory") {
        // Through `Any` every pooled connection would open a database of its own.
        return Err(ServerError::Config(format!(
            "unsupported database URL {url}: in-memory SQLite is not supported; use a file"
        )));
    }
    let options = if url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(url).map_err(invalid)?
    } else if url.contains("://") {
        return Err(ServerError::Config(format!(
            "unsupported database URL {}: use sqlite://path/to/file.db, a file path, or \
             postgres://user:password@host:5432/database",
            redacted(url)
        )));
    } else {
        SqliteConnectOptions::new().filename(Path::new(url))
    };
    Ok(Target::Sqlite(sqlite_settings(options)))
}

/// WAL (the CLI can write while a server runs on the file), a 10 s wait for the write lock, and
/// foreign keys enforced.
fn sqlite_settings(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10))
}

/// The same settings as [`sqlite_settings`], for connections the `Any` driver opens from a URL.
const SQLITE_PRAGMAS: [&str; 4] = [
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA busy_timeout = 10000",
];

/// Connections per pool, and how long a request waits for one.
pub const POOL_CONNECTIONS: u32 = 8;
pub const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections in the control pool: the agents' syncs and the scheduler's passes use their own
/// few connections, so a crowd of page renders can never make a node's heartbeat wait.
pub const CONTROL_CONNECTIONS: u32 = 8;

/// The control pool on `url` (already migrated by [`open`]).
pub async fn connect_control(url: &str) -> Result<AnyPool, ServerError> {
    connect_sized(url, CONTROL_CONNECTIONS, POOL_ACQUIRE_TIMEOUT).await
}

/// Opens the database `url` names: a `sqlite:` URL or a plain file path (the file and its folder
/// are created if missing), or a `postgres://` / `postgresql://` URL (the database must exist).
pub async fn connect(url: &str) -> Result<AnyPool, ServerError> {
    connect_sized(url, POOL_CONNECTIONS, POOL_ACQUIRE_TIMEOUT).await
}

/// [`connect`] with a pool of `connections` that waits at most `acquire_timeout` for one (tests
/// use a single connection to prove that no request ever holds two at once).
pub async fn connect_sized(
    url: &str,
    connections: u32,
    acquire_timeout: Duration,
) -> Result<AnyPool, ServerError> {
    sqlx::any::install_default_drivers();
    let cannot_open = |error: sqlx::Error| {
        ServerError::Config(format!(
            "cannot open the database {}: {error}",
            redacted(url)
        ))
    };
    let pool = match target(url)? {
        Target::Postgres(_) => {
            let options = AnyConnectOptions::from_str(url).map_err(cannot_open)?;
            AnyPoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(acquire_timeout)
                .before_acquire(|conn, _| Box::pin(still_usable(conn)))
                .connect_with(options)
                .await
                .map_err(cannot_open)?
        }
        Target::Sqlite(options) => {
            let file = std::path::absolute(options.get_filename()).map_err(|error| {
                ServerError::Config(format!("invalid database path {url}: {error}"))
            })?;
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|error| {
                    ServerError::Config(format!(
                        "cannot create the database folder {}: {error}",
                        parent.display()
                    ))
                })?;
            }
            let any_url = options.filename(file).to_url_lossy();
            let options = AnyConnectOptions::from_url(&any_url).map_err(cannot_open)?;
            AnyPoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(acquire_timeout)
                .before_acquire(|conn, _| Box::pin(still_usable(conn)))
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        for pragma in SQLITE_PRAGMAS {
                            conn.execute(pragma).await?;
                        }
                        Ok(())
                    })
                })
                .connect_with(options)
                .await
                .map_err(cannot_open)?
        }
    };
    Ok(pool)
}

/// Whether an idle connection may serve again. A transaction dropped without commit leaves a
/// rollback queued, which the pool runs (with its ping) when the connection comes back. If the
/// database had already ended the transaction itself (SQLite rolls back on its own when a commit
/// fails with a full disk), that rollback fails and sqlx still counts the connection as inside a
/// transaction, so every later `begin` on it would fail: such a connection is closed and replaced
/// instead. A counter read, no round trip.
async fn still_usable(conn: &mut sqlx::AnyConnection) -> Result<bool, sqlx::Error> {
    Ok(!conn.is_in_transaction())
}

/// Whether the database answers (readiness).
pub async fn ping(pool: &AnyPool) -> Result<(), sqlx::Error> {
    sqlx::query("select 1").execute(pool).await?;
    Ok(())
}

/// Applies the app's migrations (`migrations/sqlite` or `migrations/postgres`: the same names, the
/// same schema). Two processes opening a new database at once (a server and an admin command) may
/// race: each migration runs in its own transaction, so the loser's attempt rolls back and a retry
/// finds it applied.
pub async fn migrate(pool: &AnyPool) -> Result<(), ServerError> {
    let migrator = match engine(pool) {
        Engine::Sqlite => sqlx::migrate!("../migrations/sqlite"),
        Engine::Postgres => sqlx::migrate!("../migrations/postgres"),
    };
    let mut attempt = 0;
    loop {
        match migrator.run(pool).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < 20 => {
                attempt += 1;
                tracing::debug!(%error, attempt, "migration raced another process; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Connects and migrates: what every command does first.
pub async fn open(url: &str) -> Result<AnyPool, ServerError> {
    let pool = connect(url).await?;
    migrate(&pool).await?;
    Ok(pool)
}

/// The key of the PostgreSQL advisory lock that serializes write transactions ("hourglas").
const WRITE_LOCK: i64 = 0x686f_7572_676c_6173;

/// Begins a write transaction that runs alone among write transactions, on either engine: SQLite
/// takes its write lock up front (`BEGIN IMMEDIATE`, so two read-then-write transactions never
/// deadlock on the upgrade); PostgreSQL takes a transaction-scoped advisory lock, released at
/// commit or rollback. Reads inside see everything committed before the lock was granted.
pub async fn begin_write(pool: &AnyPool) -> Result<Transaction<'static, Any>, sqlx::Error> {
    let pool = pool.clone();
    uncancelled(async move {
        match engine(&pool) {
            Engine::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await,
            Engine::Postgres => {
                let mut tx = pool.begin().await?;
                sqlx::query("select pg_advisory_xact_lock($1)")
                    .bind(WRITE_LOCK)
                    .execute(&mut *tx)
                    .await?;
                Ok(tx)
            }
        }
    })
    .await
}

/// Runs a transaction's `BEGIN` to the end even if the caller stops waiting (a client that hangs
/// up, a timeout): sqlx's PostgreSQL `begin` cancelled mid-way returns its connection to the pool
/// inside a transaction nothing will end, and every later borrower of that connection fails
/// ("there is already a transaction in progress", then "current transaction is aborted").
/// Finished on a task of its own, the transaction is either handed over or dropped whole, which
/// rolls it back.
async fn uncancelled(
    begin: impl std::future::Future<Output = Result<Transaction<'static, Any>, sqlx::Error>>
        + Send
        + 'static,
) -> Result<Transaction<'static, Any>, sqlx::Error> {
    match tokio::spawn(begin).await {
        Ok(begun) => begun,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(sqlx::Error::PoolClosed),
    }
}

/// Begins a read-only transaction that sees one consistent state of the database and takes no
/// write lock, so writers go on meanwhile: SQLite's WAL keeps the snapshot of its first read,
/// PostgreSQL's repeatable read that of its first statement.
pub async fn begin_read(pool: &AnyPool) -> Result<Transaction<'static, Any>, sqlx::Error> {
    let pool = pool.clone();
    uncancelled(async move {
        match engine(&pool) {
            Engine::Sqlite => pool.begin().await,
            Engine::Postgres => {
                pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
            }
        }
    })
    .await
}

/// Ids per `in (…)` list: well inside both engines' limits on a statement's length.
pub const ID_CHUNK: usize = 500;

/// Ids written into a statement as `in (…)`'s list (sqlx's `Any` driver binds no arrays). Only for
/// integers the server holds, never text from a request.
pub fn id_list(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// A 0/1 flag column (or a boolean expression) read as `bool` on both engines: SQLite has no
/// boolean type and PostgreSQL's `exists`/comparisons give one. Use on `FromRow` fields as
/// `#[sqlx(try_from = "Flag")]`, or in tuples as `Flag` and `.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag(pub bool);

impl From<Flag> for bool {
    fn from(flag: Flag) -> bool {
        flag.0
    }
}

impl Type<Any> for Flag {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <i64 as Type<Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <i64 as Type<Any>>::compatible(ty) || <bool as Type<Any>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for Flag {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        match <bool as Decode<Any>>::decode(value.clone()) {
            Ok(flag) => Ok(Flag(flag)),
            Err(_) => Ok(Flag(<i64 as Decode<Any>>::decode(value)? != 0)),
        }
    }
}

/// The session store (sessions survive restarts): tower-sessions' sqlx store for the engine the
/// URL names, on a small typed pool of its own next to the app's `Any` pool.
#[derive(Clone, Debug)]
pub enum SessionStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl SessionStore {
    /// Connects to `url` and creates the store's table if missing.
    pub async fn open(url: &str) -> Result<SessionStore, ServerError> {
        let cannot_open = |error: sqlx::Error| {
            ServerError::Config(format!(
                "cannot open the session store in {}: {error}",
                redacted(url)
            ))
        };
        let store = match target(url)? {
            Target::Sqlite(options) => {
                let pool = SqlitePoolOptions::new()
                    .max_connections(2)
                    .connect_with(options)
                    .await
                    .map_err(cannot_open)?;
                SessionStore::Sqlite(SqliteStore::new(pool))
            }
            Target::Postgres(options) => {
                let pool = PgPoolOptions::new()
                    .max_connections(2)
                    .connect_with(options)
                    .await
                    .map_err(cannot_open)?;
                SessionStore::Postgres(PostgresStore::new(pool))
            }
        };
        let mut attempt = 0;
        loop {
            let migrated = match &store {
                SessionStore::Sqlite(store) => store.migrate().await,
                SessionStore::Postgres(store) => store.migrate().await,
            };
            match migrated {
                Ok(()) => return Ok(store),
                // As with the app's migrations, two processes creating the table may race.
                Err(error) if attempt < 20 => {
                    attempt += 1;
                    tracing::debug!(%error, attempt, "session-store migration raced; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

#[async_trait::async_trait]
impl session_store::SessionStore for SessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SessionStore::Sqlite(store) => store.create(record).await,
            SessionStore::Postgres(store) => store.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            SessionStore::Sqlite(store) => store.save(record).await,
            SessionStore::Postgres(store) => store.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SessionStore::Sqlite(store) => store.load(id).await,
            SessionStore::Postgres(store) => store.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SessionStore::Sqlite(store) => store.delete(id).await,
            SessionStore::Postgres(store) => store.delete(id).await,
        }
    }
}

#[async_trait::async_trait]
impl ExpiredDeletion for SessionStore {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            SessionStore::Sqlite(store) => store.delete_expired().await,
            SessionStore::Postgres(store) => store.delete_expired().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_scheme_picks_the_engine() {
        assert!(matches!(
            target("postgres://u:p@localhost/hg"),
            Ok(Target::Postgres(_))
        ));
        assert!(matches!(
            target("postgresql://localhost:5432/hg"),
            Ok(Target::Postgres(_))
        ));
        assert!(matches!(
            target("sqlite://data/hg.db"),
            Ok(Target::Sqlite(_))
        ));
        assert!(matches!(target("data/hg.db"), Ok(Target::Sqlite(_))));
        assert!(target("sqlite::memory:").is_err());
        let Err(ServerError::Config(message)) = target("mysql://u:secret@host/hg") else {
            panic!("mysql:// must be refused");
        };
        assert!(message.contains("unsupported database URL"), "{message}");
        assert!(!message.contains("secret"), "{message}");
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redacted("postgres://hg:s3cret@db:5432/hg?sslmode=require"),
            "postgres://hg:***@db:5432/hg?sslmode=require"
        );
        assert_eq!(redacted("postgres://hg@db/hg"), "postgres://hg@db/hg");
        assert_eq!(redacted("sqlite://data/hg.db"), "sqlite://data/hg.db");
        assert_eq!(redacted("data/hg.db"), "data/hg.db");
    }

    #[tokio::test]
    async fn flags_read_0_1_columns_and_boolean_expressions_alike() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(&dir.path().join("flags.db").display().to_string())
            .await
            .unwrap();
        assert_eq!(engine(&pool), Engine::Sqlite);
        let (one, zero, exists): (Flag, Flag, Flag) =
            sqlx::query_as("select 1, 0, exists (select 1 from budget_node)")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((one, zero, exists), (Flag(true), Flag(false), Flag(false)));
        let mut tx = begin_write(&pool).await.unwrap();
        sqlx::query("insert into ledger_cursor (name, through) values ('t', 1)")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
}
