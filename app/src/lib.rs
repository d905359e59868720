#![recursion_limit = "256"]
//! Hourglass UI: pages, components, `#[server]` functions and the DTOs they share with the server.
//!
//! Server functions authenticate through the signed-in user the server's session layer placed in the
//! request, and reach the database only through the [`backend::Backend`] trait the server implements,
//! so this crate never depends on the server crate or on sqlx.

pub mod backend;
pub mod budget;
pub mod calendar;
pub mod clock;
pub mod components;
pub mod error;
pub mod inbox;
pub mod lab;
pub mod live;
pub mod model;
pub mod names;
pub mod nodes;
pub mod pages;
pub mod reports;
mod routes;
pub mod session;
pub mod settings;
pub mod tokens;
pub mod users;
pub mod workloads;

use components::shell::{DemoBanner, Footer, Header};
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, Lazy,
};

/// The HTML document the server renders around [`App`].
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    content_security_policy();
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light dark" />
                <link rel="icon" href="/favicon.ico" />
                <AutoReload options=options.clone() />
                <HashedStylesheet options=options.clone() id="leptos" />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// The page's content security policy (the server's `CSP` template): a fresh nonce per response,
/// which Leptos puts on the inline scripts it writes (hydration, streamed resources).
#[cfg(feature = "ssr")]
fn content_security_policy() {
    leptos::nonce::provide_nonce();
    let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    if let Ok(value) = http::HeaderValue::from_str(&CSP.replace("{nonce}", &nonce.to_string())) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

/// The content security policy; `{nonce}` is replaced by each page's nonce. Only the site's own
/// scripts, styles, images and connections; `'wasm-unsafe-eval'` lets the page compile its wasm.
pub const CSP: &str = "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

/// The application: the shell (header, navigation) and the routed pages.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    session::provide_current_user();
    provide_context(components::shell::NavCountsChanged(RwSignal::new(0)));
    view! {
        <Title formatter=|page: String| {
            if page.is_empty() { "Hourglass".to_string() } else { format!("{page} · Hourglass") }
        } />
        <Router>
            <a class="skip-link" href="#main">"Skip to content"</a>
            <DemoBanner />
            <Header />
            <main id="main" class="page">
                <Routes fallback=pages::not_found::NotFound>
                    <Route path=path!("") view={Lazy::<routes::HomePageRoute>::new()} />
                    <Route path=path!("/login") view={Lazy::<routes::LoginPageRoute>::new()} />
                    <Route path=path!("/users") view={Lazy::<routes::UsersPageRoute>::new()} />
                    <Route path=path!("/workloads") view={Lazy::<routes::WorkloadsPageRoute>::new()} />
                    <Route path=path!("/workloads/new") view={Lazy::<routes::SubmitPageRoute>::new()} />
                    <Route path=path!("/workloads/:id") view={Lazy::<routes::WorkloadPageRoute>::new()} />
                    <Route path=path!("/queue") view={Lazy::<routes::QueuePageRoute>::new()} />
                    <Route path=path!("/nodes") view={Lazy::<routes::NodesPageRoute>::new()} />
                    <Route path=path!("/tokens") view={Lazy::<routes::TokensPageRoute>::new()} />
                    <Route path=path!("/settings") view={Lazy::<routes::SettingsPageRoute>::new()} />
                    <Route path=path!("/tree") view={Lazy::<routes::TreePageRoute>::new()} />
                    <Route path=path!("/approvals") view={Lazy::<routes::ApprovalsPageRoute>::new()} />
                    <Route path=path!("/inbox") view={Lazy::<routes::InboxPageRoute>::new()} />
                    <Route path=path!("/reports") view={Lazy::<routes::ReportsPageRoute>::new()} />
                    <Route path=path!("/lab") view={Lazy::<routes::LabPageRoute>::new()} />
                    <Route path=path!("/lab/:id") view={Lazy::<routes::LabRunPageRoute>::new()} />
                    <Route path=path!("/lab/compare/:a/:b") view={Lazy::<routes::LabComparePageRoute>::new()} />
                </Routes>
            </main>
            <Footer />
        </Router>
    }
}

/// Hydrates the page. Each route's view is a chunk of its own (see [`routes`]): hydration waits
/// for the current page's chunk, then marks the page hydrated (`data-hydrated` on `<html>`), so
/// tests (and people debugging) can tell a live page from server-rendered HTML.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // `hydrate_from_async` starts Leptos's executor on wasm-bindgen's; it runs on that one.
    wasm_bindgen_futures::spawn_local(async {
        leptos::mount::hydrate_from_async(document().body().expect("a <body>"), App)
            .await
            .forget();
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
}
