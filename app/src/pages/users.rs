//! Users page (admin): list, create, change roles, disable and re-enable accounts.

use crate::{
    calendar::format_date,
    components::field::{FieldError, FormError},
    error::AppError,
    model::{Role, UserSummary},
    users::api::{list_users, CreateUser, SetUserDisabled, SetUserRole},
};
use leptos::{html, prelude::*};
use leptos_meta::Title;

#[component]
pub fn UsersPage() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let toggle = ServerAction::<SetUserDisabled>::new();
    let role = ServerAction::<SetUserRole>::new();
    // The actions' errors are made here, not in the forms below: an action's result reloads
    // the list and replaces them, and a replaced form may still be told of the new value as
    // it goes, when a signal made in it would be gone (see the workload page).
    let create_error = Signal::derive(move || create.value().get().and_then(Result::err));
    let toggle_error = Signal::derive(move || toggle.value().get().and_then(Result::err));
    let role_error = Signal::derive(move || role.value().get().and_then(Result::err));
    let users = Resource::new(
        move || {
            (
                create.version().get(),
                toggle.version().get(),
                role.version().get(),
            )
        },
        |_| list_users(),
    );
    // The signed-in admin's own row offers no role change (another admin makes it).
    let me = crate::session::use_current_user();

    view! {
        <Title text="Users" />
        <h1>"Users"</h1>
        <Transition fallback=|| view! { <p class="loading">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                let me = me.await.ok().flatten().map(|u| u.id);
                match users.await {
                    Ok(list) => view! {
                        <div class="columns">
                            <UserTable users=list toggle role toggle_error role_error me />
                            <CreateUserForm create error=create_error />
                        </div>
                    }.into_any(),
                    Err(AppError::Forbidden(message)) => view! {
                        <section class="card refusal" role="alert">
                            <h2>"Not available to you"</h2>
                            <p>{message}</p>
                        </section>
                    }.into_any(),
                    Err(error) => view! {
                        <p class="form-error" role="alert">{error.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn UserTable(
    users: Vec<UserSummary>,
    toggle: ServerAction<SetUserDisabled>,
    role: ServerAction<SetUserRole>,
    /// The actions' errors (made by the page, which outlives this table).
    toggle_error: Signal<Option<AppError>>,
    role_error: Signal<Option<AppError>>,
    me: Option<i64>,
) -> impl IntoView {
    view! {
        <section class="card grow">
            <h2>"Accounts"</h2>
            <FormError error=toggle_error />
            <FormError error=role_error />
            <div class="table-scroll">
            <table class="table">
                <caption class="visually-hidden">"All user accounts"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Username"</th>
                        <th scope="col">"Role"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Created"</th>
                        <th scope="col"><span class="visually-hidden">"Actions"</span></th>
                    </tr>
                </thead>
                <tbody>
                    {users.into_iter().map(|user| {
                        let own = me == Some(user.id);
                        view! { <UserRow user toggle role own /> }
                    }).collect_view()}
                </tbody>
            </table>
            </div>
        </section>
    }
}

#[component]
fn UserRow(
    user: UserSummary,
    toggle: ServerAction<SetUserDisabled>,
    role: ServerAction<SetUserRole>,
    /// The signed-in admin's own account.
    own: bool,
) -> impl IntoView {
    let (status, action_label) = if user.disabled {
        ("Disabled", "Enable")
    } else {
        ("Active", "Disable")
    };
    let label = format!("{action_label} {}", user.username);
    view! {
        <tr class:muted=user.disabled>
            <td>{user.username.clone()}</td>
            <td>
                {if own {
                    view! { {user.role.label()}<span class="hint">" (you)"</span> }.into_any()
                } else {
                    let current = user.role;
                    view! {
                        <ActionForm action=role attr:class="inline-form">
                            <input type="hidden" name="user_id" value=user.id />
                            <select name="role" aria-label=format!("Role of {}", user.username)>
                                {Role::ALL.iter().map(|r| view! {
                                    <option value=r.as_str() selected=*r == current>{r.label()}</option>
                                }).collect_view()}
                            </select>
                            <button type="submit" class="button-quiet" aria-label=format!("Change the role of {}", user.username)>"Change"</button>
                        </ActionForm>
                    }.into_any()
                }}
            </td>
            <td><span class="status" class:status-off=user.disabled>{status}</span></td>
            <td><time>{format_date(user.created_at)}</time></td>
            <td class="actions">
                <ActionForm action=toggle>
                    <input type="hidden" name="user_id" value=user.id />
                    <input type="hidden" name="disabled" value=(!user.disabled).to_string() />
                    <button type="submit" class="button-quiet" aria-label=label>{action_label}</button>
                </ActionForm>
            </td>
        </tr>
    }
}

#[component]
fn CreateUserForm(
    create: ServerAction<CreateUser>,
    /// The action's error (made by the page, which outlives this form).
    error: Signal<Option<AppError>>,
) -> impl IntoView {
    let form = NodeRef::<html::Form>::new();
    let created = move || create.value().get().and_then(Result::ok);
    // Clear the form once the server accepted it, so the next user starts from empty fields.
    Effect::new(move |_| {
        if created().is_some() {
            if let Some(form) = form.get() {
                form.reset();
            }
        }
    });
    let describe = move |field: &'static str, id: &'static str| {
        move || error.get().and_then(|e| e.for_field(field)).map(|_| id)
    };

    view! {
        <section class="card">
            <h2>"Create a user"</h2>
            <ActionForm action=create node_ref=form attr:class="stack">
                <FormError error />
                <label for="new-username">"Username"</label>
                <input id="new-username" name="username" type="text" autocomplete="off" required
                    aria-describedby=describe("username", "new-username-error") />
                <FieldError id="new-username-error" field="username" error />
                <label for="new-role">"Role"</label>
                <select id="new-role" name="role">
                    {Role::ALL.iter().map(|role| view! {
                        <option value=role.as_str()>{role.label()}</option>
                    }).collect_view()}
                </select>
                <FieldError id="new-role-error" field="role" error />
                <label for="new-password">"Password"</label>
                <input id="new-password" name="password" type="password" autocomplete="new-password" required
                    aria-describedby=describe("password", "new-password-error") />
                <FieldError id="new-password-error" field="password" error />
                <p class="hint">"At least 8 characters. Share it with the person through a safe channel."</p>
                <button type="submit" class="button" disabled=move || create.pending().get()>
                    {move || if create.pending().get() { "Creating…" } else { "Create user" }}
                </button>
                <p class="notice" role="status">
                    {move || created().map(|u| format!("Created {} ({}).", u.username, u.role.label()))}
                </p>
            </ActionForm>
        </section>
    }
}
