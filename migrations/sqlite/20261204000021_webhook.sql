-- The outgoing webhook (Settings: Webhook): each message it sends, and how far it has read the
-- events it carries (one row; set when a URL is first saved, so history is never replayed).
create table webhook_message (
    webhook_message_id integer primary key,
    created_at integer not null,
    text text not null,
    state text not null check (state in ('pending', 'sent', 'failed')),
    attempts integer not null default 0,
    -- A failed attempt is tried again from here (exponential backoff).
    next_at integer not null,
    last_error text,
    sent_at integer
);
create index webhook_message_by_state on webhook_message (state, webhook_message_id);

create table webhook_cursor (
    webhook_cursor_id integer primary key check (webhook_cursor_id = 1),
    event_id integer not null,
    request_id integer not null,
    decided_at integer not null
);
