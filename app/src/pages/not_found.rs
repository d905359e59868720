use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Page not found" />
        <section class="card narrow">
            <h1>"Page not found"</h1>
            <p>"There is no page at this address. It may have moved, or the link may be mistyped."</p>
            <p><a href="/">"Go to the overview"</a></p>
        </section>
    }
}
