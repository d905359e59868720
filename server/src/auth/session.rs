//! Sessions: the cookie, signing in and out, and resolving the signed-in user of each request.

use crate::{db::SessionStore, guard::throttle, users::service, AppState, ServerError};
use app::model::CurrentUser;
use axum::{
    extract::{ConnectInfo, Request, State},
    http::{Extensions, HeaderMap, Method, Uri},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
    Form,
};
use serde::Deserialize;
use std::net::SocketAddr;
use tower_sessions::{cookie::SameSite, Expiry, Session, SessionManagerLayer};

pub const COOKIE_NAME: &str = "hourglass_session";
const USER_ID_KEY: &str = "user_id";

/// `hourglass_session=…` from a response's `Set-Cookie` headers, as a client sends it back.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| {
            v.strip_prefix(COOKIE_NAME)
                .is_some_and(|rest| rest.starts_with('='))
        })
        .and_then(|v| v.split(';').next())
        .map(str::to_string)
}

/// The session layer: a database-backed store (sessions survive restarts), an `HttpOnly`,
/// `SameSite=Lax` cookie, `Secure` when the site is served over HTTPS, expiring after a week idle.
pub fn layer(state: &AppState) -> SessionManagerLayer<SessionStore> {
    SessionManagerLayer::new(state.sessions.clone())
        .with_name(COOKIE_NAME)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.secure_cookies)
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)))
}

#[derive(Deserialize)]
pub struct SignIn {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
}

/// `POST /login`: on success a new session id (no fixation) and a redirect to where the person was
/// going; on failure back to the form with one generic message.
pub async fn login(
    State(state): State<AppState>,
    extensions: Extensions,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<SignIn>,
) -> Result<Response, ServerError> {
    let next = safe_next(&form.next);
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let address = state.proxy.client(peer, &headers);
    let now = state.runtime.now();
    if let Some(wait) = throttle::wait_for(&state.pool, &form.username, address, now).await? {
        tracing::warn!(username = %form.username.trim(), ?address, "sign-in throttled");
        let query = serde_urlencoded::to_string([
            ("error", "throttled"),
            ("minutes", &((wait + 59) / 60).max(1).to_string()),
            ("username", form.username.trim()),
            ("next", next.as_str()),
        ])
        .unwrap_or_default();
        return Ok(Redirect::to(&format!("/login?{query}")).into_response());
    }
    match service::authenticate(&state.pool, &form.username, form.password).await? {
        Some(user) => {
            throttle::succeeded(&state.pool, &form.username).await?;
            session.cycle_id().await?;
            session.insert(USER_ID_KEY, user.id).await?;
            tracing::info!(user = %user.username, "signed in");
            Ok(Redirect::to(&next).into_response())
        }
        None => {
            throttle::failed(&state.pool, &form.username, address, now).await?;
            tracing::info!(username = %form.username.trim(), "sign-in refused");
            let query = serde_urlencoded::to_string([
                ("error", "1"),
                ("username", form.username.trim()),
                ("next", next.as_str()),
            ])
            .unwrap_or_default();
            Ok(Redirect::to(&format!("/login?{query}")).into_response())
        }
    }
}

/// `POST /logout`: ends the session everywhere (the stored record is deleted).
pub async fn logout(session: Session) -> Result<Redirect, ServerError> {
    session.flush().await?;
    Ok(Redirect::to("/login?signed_out=1"))
}

/// Middleware: resolves the session's user into the request's extensions (where pages, server
/// functions and handlers read it), and sends anonymous visitors of app pages to `/login`.
pub async fn load_user(
    State(state): State<AppState>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    let user = match resolve_user(&state, &session).await {
        Ok(user) => user,
        Err(error) => return error.into_response(),
    };
    match user {
        Some(user) => {
            request.extensions_mut().insert(user);
        }
        None if needs_sign_in(request.method(), request.uri().path()) => {
            return Redirect::to(&login_url(request.uri())).into_response();
        }
        None => {}
    }
    next.run(request).await
}

async fn resolve_user(
    state: &AppState,
    session: &Session,
) -> Result<Option<CurrentUser>, ServerError> {
    let Some(user_id) = session.get::<i64>(USER_ID_KEY).await? else {
        return Ok(None);
    };
    let user = service::active_user(&state.pool, user_id).await?;
    if user.is_none() {
        // The account was disabled or removed: end its sessions as they are next used.
        session.flush().await?;
    }
    Ok(user)
}

/// Pages need a signed-in user; the login page, health check, metrics (behind their own token),
/// static assets and server functions (which answer `Unauthenticated` themselves) do not.
fn needs_sign_in(method: &Method, path: &str) -> bool {
    let public = path == "/login"
        || matches!(path, "/healthz" | "/readyz" | "/livez" | "/metrics")
        || path == "/favicon.ico"
        || path.starts_with("/pkg/")
        || path.starts_with("/assets/")
        || path.starts_with("/api/");
    (method == Method::GET || method == Method::HEAD) && !public
}

fn login_url(uri: &Uri) -> String {
    let target = uri.path_and_query().map(|pq| pq.as_str()).unwrap_or("/");
    if target == "/" {
        return "/login".to_string();
    }
    format!(
        "/login?{}",
        serde_urlencoded::to_string([("next", target)]).unwrap_or_default()
    )
}

/// Only local paths are followed after sign-in, never another site (`//evil.example`, `https:`).
pub fn safe_next(next: &str) -> String {
    let local = next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\");
    if local && !next.starts_with("/login") {
        next.to_string()
    } else {
        "/".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(safe_next("/users?x=1"), "/users?x=1");
        assert_eq!(safe_next("//evil.example/"), "/");
        assert_eq!(safe_next("https://evil.example/"), "/");
        assert_eq!(safe_next("/\\evil.example"), "/");
        assert_eq!(safe_next(""), "/");
        assert_eq!(safe_next("/login?next=/x"), "/");
    }

    #[test]
    fn assets_and_the_login_page_are_public_but_pages_are_not() {
        assert!(!needs_sign_in(&Method::GET, "/login"));
        assert!(!needs_sign_in(&Method::GET, "/pkg/hourglass.wasm"));
        assert!(!needs_sign_in(&Method::POST, "/api/users/list"));
        assert!(needs_sign_in(&Method::GET, "/"));
        assert!(needs_sign_in(&Method::GET, "/users"));
        assert!(needs_sign_in(&Method::GET, "/no-such-page"));
    }

    #[test]
    fn the_login_redirect_remembers_the_page_and_its_query() {
        let uri: Uri = "/users?tab=all".parse().unwrap();
        assert_eq!(login_url(&uri), "/login?next=%2Fusers%3Ftab%3Dall");
        assert_eq!(login_url(&"/".parse().unwrap()), "/login");
    }
}
