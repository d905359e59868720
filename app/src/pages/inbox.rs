//! The inbox: approvals waiting for the signed-in person, decisions on their requests, and their
//! workloads' preemptions and failures, newest first.

use crate::{
    clock::now_s,
    components::{field::FormError, shell::NavCountsChanged, time::Moment},
    inbox::{
        api::{get_inbox, MarkInboxRead},
        InboxItem,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn InboxPage() -> impl IntoView {
    let read = ServerAction::<MarkInboxRead>::new();
    let inbox = Resource::new(move || read.version().get(), |_| get_inbox());
    if let Some(nav) = use_context::<NavCountsChanged>() {
        Effect::new(move |first: Option<()>| {
            read.version().get();
            if first.is_some() {
                nav.0.update(|n| *n += 1);
            }
        });
    }
    let error = Signal::derive(move || read.value().get().and_then(Result::err));
    view! {
        <Title text="Inbox" />
        <h1>"Inbox"</h1>
        <p class="lede">"Change requests waiting for you, decisions on yours, and your workloads preempted or failed in the last 30 days."</p>
        <section class="card">
            <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match inbox.await {
                        Ok(inbox) if inbox.items.is_empty() => view! {
                            <p class="empty">"Nothing yet. You are told here when a request waits for your decision, when yours is decided, and when a workload of yours is preempted or fails."</p>
                        }.into_any(),
                        Ok(inbox) => {
                            let now = now_s();
                            view! {
                                <div class="inbox-head">
                                    <p>{match inbox.unread { 0 => "All read.".to_string(), 1 => "1 unread.".into(), n => format!("{n} unread.") }}</p>
                                    {(inbox.unread > 0).then(|| view! {
                                        <ActionForm action=read>
                                            <button type="submit" class="button-quiet">"Mark all as read"</button>
                                        </ActionForm>
                                    })}
                                </div>
                                <FormError error />
                                <ul class="inbox" aria-label="Notifications">
                                    {inbox.items.into_iter().map(|item| view! { <Item item now /> }).collect_view()}
                                </ul>
                            }.into_any()
                        }
                        Err(e) => view! { <p class="form-error" role="alert">{e.to_string()}</p> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Item(item: InboxItem, now: i64) -> impl IntoView {
    let label = if item.unread {
        format!("{} (unread)", item.title)
    } else {
        item.title.clone()
    };
    view! {
        <li class="inbox-item" class:unread=item.unread aria-label=label>
            <span class="state">{item.kind.label()}</span>
            " "
            <a href=item.href>{item.title}</a>
            " · "
            <Moment at=item.at now />
            <p>{item.sentence}</p>
        </li>
    }
}
