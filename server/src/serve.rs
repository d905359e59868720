//! `hourglass serve`: open the database, check the built site, listen until SIGINT/SIGTERM.

use crate::{
    build_app,
    config::ServeArgs,
    db,
    runtime::{config::RuntimeConfig, Runtime},
    AppState, ServerError,
};
use leptos::config::LeptosOptions;
use std::time::Duration;
use tower_sessions::ExpiredDeletion;

pub async fn run(database: &str, args: ServeArgs) -> Result<(), ServerError> {
    crate::site::Bundle::read(&args.site_root)?.check(&args.site_root)?;
    let pool = db::open(database).await?;
    let control_pool = db::connect_control(database).await?;
    let sessions = db::SessionStore::open(database).await?;
    if args.demo {
        crate::demo::prepare(&pool, crate::clock::Clock::system().now()).await?;
    }
    let leptos_options = leptos_options(&args)?;
    let runtime = Runtime::new(
        control_pool.clone(),
        crate::settings::load(&pool, runtime_config(&args)).await?,
    );
    let state = AppState {
        leptos_options,
        pool: pool.clone(),
        control_pool,
        sessions: sessions.clone(),
        secure_cookies: args.secure_cookies,
        runtime: runtime.clone(),
        lab: crate::lab::Lab::new(args.philly_trace.clone()),
        proxy: std::sync::Arc::new(
            crate::guard::client::ProxySettings::parse(
                &args.trusted_proxies,
                args.public_url.as_deref(),
            )
            .map_err(ServerError::Config)?,
        ),
        metrics_token: args.metrics_token.clone().filter(|t| !t.is_empty()),
    };
    let scheduler = runtime.spawn();
    crate::webhook::deliver::spawn(pool.clone(), runtime.clone(), Duration::from_secs(5));
    crate::workloads::estimate::keep_warm(pool.clone(), runtime.clone(), Duration::from_secs(5));

    tokio::spawn(async move {
        if let Err(error) = sessions
            .continuously_delete_expired(Duration::from_secs(3600))
            .await
        {
            tracing::warn!(%error, "expired-session cleanup stopped");
        }
    });

    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|error| ServerError::Config(format!("cannot listen on {}: {error}", args.addr)))?;
    let addr = listener.local_addr()?;
    let demo_agents = if args.demo {
        let agents =
            crate::demo::start_agents(&pool, addr, crate::clock::Clock::system().now()).await?;
        crate::demo::trickle::spawn(pool.clone(), runtime.clone(), Duration::from_secs(15));
        agents
    } else {
        Vec::new()
    };
    tracing::info!(%addr, database = %db::redacted(database), "Hourglass is listening");
    println!("Hourglass is listening on http://{addr}");
    let app = build_app(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let stopping = runtime.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("stopping: finishing requests in flight");
            stopping.begin_stopping();
        })
        .await?;
    // Stop deciding before giving the lease up, or the next pass would take it back.
    scheduler.stop().await;
    // The demo's agents heard the same signal and are ending their runs (SIGTERM, then SIGKILL
    // after the grace period): wait for them, so no demo job outlives the server.
    let grace = Duration::from_secs(runtime.config().grace.max(0) as u64 + 10);
    for agent in demo_agents {
        if tokio::time::timeout(grace, agent).await.is_err() {
            tracing::warn!("a demo agent did not finish stopping its runs in time");
        }
    }
    if let Err(error) = runtime.release().await {
        tracing::warn!(%error, "could not release the scheduler lease");
    }
    tracing::info!("stopped");
    Ok(())
}

pub fn leptos_options(args: &ServeArgs) -> Result<LeptosOptions, ServerError> {
    crate::site::leptos_options(&args.site_root, args.addr)
}

pub fn runtime_config(args: &ServeArgs) -> RuntimeConfig {
    RuntimeConfig {
        heartbeat_deadline: args.heartbeat_deadline_s.max(1),
        grace: args.grace_s.max(0),
        ..RuntimeConfig::default()
    }
}
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}
