//! The landing page after sign-in.

use crate::{model::Role, session::use_current_user};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn HomePage() -> impl IntoView {
    let user = use_current_user();
    view! {
        <Title text="Overview" />
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                user.await.ok().flatten().map(|user| {
                    let role = user.role;
                    view! {
                        <section class="hero">
                            <h1>{format!("Welcome, {}", user.username)}</h1>
                            <p class="lede">
                                "Hourglass funds programs, projects and researchers with shares of GPU time, "
                                "and schedules their workloads so that each receives what it was funded for "
                                "over a sliding week while the GPUs stay busy."
                            </p>
                        </section>
                        <section class="card">
                            <h2>"Your account"</h2>
                            <dl class="facts">
                                <dt>"Signed in as"</dt>
                                <dd>{user.username.clone()}</dd>
                                <dt>"Role"</dt>
                                <dd>{role.label()}</dd>
                                <dt>"What you can do"</dt>
                                <dd>{role_summary(role)}</dd>
                            </dl>
                            {(role == Role::Admin).then(|| view! {
                                <p><a class="button" href="/users">"Manage users"</a></p>
                            })}
                        </section>
                    }
                })
            })}
        </Suspense>
    }
}

fn role_summary(role: Role) -> &'static str {
    match role {
        Role::Researcher => {
            "Submit workloads to the projects you belong to and follow why each one waits or runs."
        }
        Role::Leadership => "Review funded versus delivered GPU time across programs and quarters.",
        Role::Admin => "Manage users and GPU nodes, and tune the scheduler's settings.",
    }
}
