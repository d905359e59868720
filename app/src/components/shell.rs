//! The frame around every page: product name, navigation, the signed-in user and sign-out.

use crate::{model::CurrentUser, session::use_current_user};
use leptos::prelude::*;
use leptos_router::components::A;

#[component]
pub fn Header() -> impl IntoView {
    let user = use_current_user();
    view! {
        <header class="topbar">
            <a class="brand" href="/">
                <span class="brand-mark" aria-hidden="true">"⧗"</span>
                "Hourglass"
            </a>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match user.await {
                        Ok(Some(user)) => view! { <MainNav user=user.clone() /> <UserMenu user /> }.into_any(),
                        _ => ().into_any(),
                    }
                })}
            </Transition>
        </header>
    }
}

/// The sections a person can open. Sections that do not exist yet are not listed.
#[component]
fn MainNav(user: CurrentUser) -> impl IntoView {
    view! {
        <nav class="mainnav" aria-label="Main">
            <A href="/" exact=true>"Overview"</A>
            {user.is_admin().then(|| view! { <A href="/users">"Users"</A> })}
        </nav>
    }
}

#[component]
fn UserMenu(user: CurrentUser) -> impl IntoView {
    view! {
        <div class="usermenu">
            <span class="whoami">
                <span class="username">{user.username.clone()}</span>
                <span class="role-badge">{user.role.label()}</span>
            </span>
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
