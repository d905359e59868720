//! The frame around every page: product name, navigation, the signed-in user and sign-out.

use crate::{model::CurrentUser, session::use_current_user};
use leptos::prelude::*;
use leptos_router::components::A;

#[component]
pub fn Header() -> impl IntoView {
    let user = use_current_user();
    let counts = nav_counts_resource();
    view! {
        <header class="topbar">
            <a class="brand" href="/">
                <svg class="brand-mark" viewBox="0 0 16 16" width="20" height="20" aria-hidden="true">
                    <path d="M3 1.5h10M3 14.5h10M4 1.5c0 4 4 4.5 4 6.5s-4 2.5-4 6.5M12 1.5c0 4-4 4.5-4 6.5s4 2.5 4 6.5"
                        fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round" />
                    <path d="M5.5 13.5c.8-2 4.2-2 5 0z" fill="currentColor" />
                </svg>
                "Hourglass"
            </a>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match user.await {
                        Ok(Some(user)) => {
                            let counts = counts.await.unwrap_or_default();
                            view! { <MainNav user=user.clone() awaiting=counts.awaiting /> <UserMenu user unread=counts.unread /> }.into_any()
                        }
                        _ => ().into_any(),
                    }
                })}
            </Transition>
        </header>
    }
}

/// Bumped by pages that change what the navigation counts (deciding requests, reading the
/// inbox), so its counts follow without a reload.
#[derive(Clone, Copy)]
pub struct NavCountsChanged(pub RwSignal<u32>);

/// What the navigation counts for the signed-in person (nothing signed out). Created with the
/// header, never inside a suspended view: resources are matched to their server-side values by
/// the order they are created in.
fn nav_counts_resource() -> Resource<Result<crate::inbox::NavCounts, crate::error::AppError>> {
    let changed = use_context::<NavCountsChanged>().map(|c| c.0);
    Resource::new(
        move || changed.map(|c| c.get()),
        |_| crate::inbox::api::nav_counts(),
    )
}

/// A count beside a link (nothing for none); `what` completes its accessible name.
fn count_badge(n: usize, what: &'static str) -> impl IntoView {
    (n > 0).then(|| {
        view! {
            <span class="count-badge" aria-hidden="true">{n}</span>
            <span class="visually-hidden">{format!(", {n} {what}")}</span>
        }
    })
}

/// On the demo's database, a line on every page saying what is made up.
#[component]
pub fn DemoBanner() -> impl IntoView {
    let demo = Resource::new(|| (), |_| crate::settings::api::demo_mode());
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                matches!(demo.await, Ok(true)).then(|| view! {
                    <p class="demo-banner" role="note">
                        <strong>"Demo"</strong>
                        " — the GPU nodes, their utilization and the history before today are simulated; the people and the budget tree are examples."
                    </p>
                })
            })}
        </Transition>
    }
}

/// The sections a person can open. Sections that do not exist yet are not listed.
#[component]
fn MainNav(user: CurrentUser, awaiting: usize) -> impl IntoView {
    view! {
        <nav class="mainnav" aria-label="Main">
            <A href="/" exact=true>"Overview"</A>
            <A href="/workloads">"Workloads"</A>
            <A href="/queue">"Queue"</A>
            <A href="/nodes">"Nodes"</A>
            <A href="/tree">"Budget tree"</A>
            <A href="/approvals">"Approvals"{count_badge(awaiting, "waiting for you")}</A>
            <A href="/reports">"Reports"</A>
            {(user.role != crate::model::Role::Researcher).then(|| view! { <A href="/lab">"Lab"</A> })}
            {user.is_admin().then(|| view! { <A href="/users">"Users"</A> <A href="/settings">"Settings"</A> })}
        </nav>
    }
}

#[component]
fn UserMenu(user: CurrentUser, unread: usize) -> impl IntoView {
    view! {
        <div class="usermenu">
            <span class="whoami">
                <span class="username">{user.username.clone()}</span>
                <span class="role-badge">{user.role.label()}</span>
            </span>
            <A href="/inbox" attr:class="button-quiet button bell" attr:title="Inbox">
                <svg viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">
                    <path d="M8 1.8a4 4 0 0 0-4 4v2.8L2.6 11h10.8L12 8.6V5.8a4 4 0 0 0-4-4zM6.4 13a1.6 1.6 0 0 0 3.2 0"
                        fill="none" stroke="currentColor" stroke-width="1.4" stroke-linejoin="round" />
                </svg>
                <span class="visually-hidden">"Inbox"</span>
                {count_badge(unread, "unread")}
            </A>
            <a href="/tokens" class="button-quiet button" title="API tokens">"Tokens"</a>
            // A plain form: signing out reloads the whole page so no state of the old session stays.
            <form method="post" action="/logout">
                <button type="submit" class="button-quiet">"Sign out"</button>
            </form>
        </div>
    }
}

#[component]
pub fn Footer() -> impl IntoView {
    view! {
        <footer class="footer">
            "Hourglass — GPU time, funded ahead and delivered fairly."
        </footer>
    }
}
