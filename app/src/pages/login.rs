//! Sign-in. A plain HTML form posted to the server's `/login` handler, so it works before (or
//! without) hydration, and a successful sign-in reloads the app with the new session.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The one message for any failed sign-in: it never says which part was wrong.
pub const SIGN_IN_FAILED: &str = "That username and password did not match an active account.";

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".to_string());
    let username = move || query.read().get("username").unwrap_or_default();
    let failed = move || query.read().get("error").is_some();
    let throttled = move || query.read().get("error").as_deref() == Some("throttled");
    let minutes = move || query.read().get("minutes").unwrap_or_else(|| "15".into());
    let signed_out = move || query.read().get("signed_out").is_some();

    view! {
        <Title text="Sign in" />
        <section class="card narrow login">
            <h1>"Sign in to Hourglass"</h1>
            <p class="notice" role="status" hidden=move || !signed_out()>"You have signed out."</p>
            <form method="post" action="/login" class="stack">
                <p id="login-error" class="form-error" role="alert" hidden=move || !failed()>
                    {move || if throttled() {
                        format!("Too many failed sign-ins for this account or from your address. Try again in {} minutes.", minutes())
                    } else {
                        SIGN_IN_FAILED.to_string()
                    }}
                </p>
                <label for="username">"Username"</label>
                <input
                    id="username"
                    name="username"
                    type="text"
                    autocomplete="username"
                    autocapitalize="none"
                    spellcheck="false"
                    required
                    autofocus=move || !failed()
                    value=username()
                    aria-describedby=move || failed().then_some("login-error")
                />
                <label for="password">"Password"</label>
                <input
                    id="password"
                    name="password"
                    type="password"
                    autocomplete="current-password"
                    required
                    autofocus=failed
                    aria-describedby=move || failed().then_some("login-error")
                />
                <input type="hidden" name="next" value=next() />
                <button type="submit" class="button">"Sign in"</button>
            </form>
            <p class="hint">"Accounts are created by an administrator."</p>
        </section>
    }
}
