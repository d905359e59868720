//! The Budget tree's people panel: a node's owners and members, added and removed in place by
//! those allowed to, and the history of who changed them.

use crate::{
    budget::people::{node_people, ChangeGrant, GrantKind, NodePeople},
    components::time::Moment,
};
use leptos::prelude::*;

/// The people of `path`; `changed` is told after each accepted change (the tree reloads).
#[component]
pub fn PeoplePanel(
    path: String,
    close: WriteSignal<Option<String>>,
    changed: WriteSignal<u32>,
) -> impl IntoView {
    let change = ServerAction::<ChangeGrant>::new();
    let people = Resource::new(move || change.version().get(), {
        let path = path.clone();
        move |_| node_people(path.clone())
    });
    Effect::new(move |_| {
        if matches!(change.value().get(), Some(Ok(_))) {
            changed.update(|n| *n += 1);
        }
    });
    let name = if path.is_empty() {
        "the cluster".to_string()
    } else {
        path.clone()
    };
    let heading = format!("People of {name}");
    // Opened from a row far above: brought into view.
    let section = NodeRef::<leptos::html::Section>::new();
    Effect::new(move |_| {
        if let Some(s) = section.get() {
            s.scroll_into_view();
        }
    });
    view! {
        <section class="card people" aria-labelledby="people-panel-heading" node_ref=section>
            <div class="chart-head">
                <h2 id="people-panel-heading">{heading}</h2>
                <button type="button" class="button-quiet" on:click=move |_| close.set(None)>"Close"</button>
            </div>
            {move || change.value().get().and_then(Result::err).map(|e| view! {
                <p class="form-error" role="alert">{e.to_string()}</p>
            })}
            <Transition fallback=|| view! { <p class="loading">"Loading its people…"</p> }>
                {move || Suspend::new(async move {
                    match people.await {
                        Ok(p) => view! { <PeopleLists people=p change /> }.into_any(),
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn PeopleLists(people: NodePeople, change: ServerAction<ChangeGrant>) -> impl IntoView {
    let now = crate::clock::now_s();
    let owners = view! {
        <Grants kind=GrantKind::Owner path=people.path.clone() names=people.owners.clone()
            can_manage=people.can_manage_owners change />
    };
    let members = people.leaf.then(|| {
        view! {
            <Grants kind=GrantKind::Member path=people.path.clone() names=people.members.clone()
                can_manage=people.can_manage_members change />
        }
    });
    view! {
        <div class="columns">
            {owners}
            {members}
        </div>
        <h3>"History"</h3>
        {if people.history.is_empty() {
            view! { <p class="empty">"No one has been added or removed here yet."</p> }.into_any()
        } else {
            view! {
                <ul class="plain history">
                    {people.history.into_iter().map(|c| {
                        let who = c.by.unwrap_or_else(|| "An import by an admin".into());
                        let what = if c.added { "added" } else { "removed" };
                        view! {
                            <li>
                                <Moment at=c.at now />
                                {format!(" — {who} {what} {} as {}", c.username, match c.kind { GrantKind::Owner => "an owner", GrantKind::Member => "a member" })}
                            </li>
                        }
                    }).collect_view()}
                </ul>
            }.into_any()
        }}
    }
}

/// One kind of grant on a node: the names, each removable, and a form to add one.
#[component]
fn Grants(
    kind: GrantKind,
    path: String,
    names: Vec<String>,
    can_manage: bool,
    change: ServerAction<ChangeGrant>,
) -> impl IntoView {
    let (title, adding, none) = match kind {
        GrantKind::Owner => (
            "Owners",
            "Add an owner",
            "No owners: decisions go to the owners above.",
        ),
        GrantKind::Member => (
            "Members",
            "Add a member",
            "No members yet: nobody may submit work here.",
        ),
    };
    let input_id = format!("add-{kind}");
    view! {
        <div>
            <h3>{title}</h3>
            {if names.is_empty() {
                view! { <p class="empty">{none}</p> }.into_any()
            } else {
                view! {
                    <ul class="plain">
                        {names.into_iter().map(|n| {
                            let remove = can_manage.then(|| {
                                let (path, n2) = (path.clone(), n.clone());
                                view! {
                                    " "
                                    <button type="button" class="button-quiet"
                                        aria-label=format!("Remove {n} as {kind}")
                                        disabled=move || change.pending().get()
                                        on:click=move |_| { change.dispatch(ChangeGrant { kind: kind.to_string(), path: path.clone(), username: n2.clone(), add: false }); }>
                                        "Remove"
                                    </button>
                                }
                            });
                            view! { <li>{n.clone()}{remove}</li> }
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
            {can_manage.then(|| view! {
                <ActionForm action=change attr:class="inline-form">
                    <input type="hidden" name="kind" value=kind.to_string() />
                    <input type="hidden" name="path" value=path.clone() />
                    <input type="hidden" name="add" value="true" />
                    <label for=input_id.clone()>{format!("{adding}: username")}</label>
                    <input id=input_id name="username" type="text" required autocomplete="off" />
                    <button type="submit" disabled=move || change.pending().get()>{adding}</button>
                </ActionForm>
            })}
        </div>
    }
}
