//! Personal API tokens for scripts.

use crate::{
    calendar::format_date,
    components::{
        copy::CopyButton,
        field::{FieldError, FormError},
    },
    tokens::api::{list_tokens, CreateToken, RevokeToken},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn TokensPage() -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let tokens = Resource::new(
        move || (create.version().get(), revoke.version().get()),
        |_| list_tokens(),
    );
    let error = Signal::derive(move || create.value().get().and_then(Result::err));
    let secret = move || create.value().get().and_then(Result::ok);
    view! {
        <Title text="API tokens" />
        <h1>"API tokens"</h1>
        <p class="lede">"Scripts use a token as " <code>"Authorization: Bearer …"</code> " with the JSON API under " <code>"/api/v1"</code> "."</p>
        <div class="columns">
            <section class="card grow">
                <h2>"Your tokens"</h2>
                <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match tokens.await {
                            Ok(list) if list.is_empty() => view! { <p class="empty">"You have no tokens."</p> }.into_any(),
                            Ok(list) => view! {
                                <table class="table">
                                    <thead><tr><th scope="col">"Name"</th><th scope="col">"Created"</th><th scope="col">"Last used"</th><th scope="col"><span class="visually-hidden">"Actions"</span></th></tr></thead>
                                    <tbody>
                                        {list.into_iter().map(|t| view! {
                                            <tr>
                                                <td>{t.name.clone()}</td>
                                                <td>{format_date(t.created_at)}</td>
                                                <td>{t.last_used_at.map(format_date).unwrap_or_else(|| "never".into())}</td>
                                                <td class="actions">
                                                    <ActionForm action=revoke>
                                                        <input type="hidden" name="id" value=t.api_token_id />
                                                        <button type="submit" class="button-quiet" aria-label=format!("Revoke {}", t.name)>"Revoke"</button>
                                                    </ActionForm>
                                                </td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            }.into_any(),
                            Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                        }
                    })}
                </Transition>
            </section>
            <section class="card">
                <h2>"Create a token"</h2>
                <ActionForm action=create attr:class="stack">
                    <FormError error />
                    <label for="token-name">"Token name"</label>
                    <input id="token-name" name="name" type="text" required placeholder="e.g. laptop scripts" />
                    <FieldError id="token-name-error" field="name" error />
                    <button type="submit" class="button">"Create token"</button>
                </ActionForm>
                {move || secret().map(|secret| view! {
                    <div class="secret" role="status">
                        <p>"Copy it now; it is shown only once:"</p>
                        <pre>{secret.clone()}</pre>
                        <CopyButton text=secret label="Copy the token" />
                    </div>
                })}
            </section>
        </div>
    }
}
