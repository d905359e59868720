-- People who sign in. `role` is the global role; tree-node ownership and project membership are
-- separate tables (later migrations), so a person can be a researcher and own their project node.
create table user (
    user_id integer primary key,
    username text not null,
    password_hash text not null,
    role text not null check (role in ('researcher', 'leadership', 'admin')),
    disabled integer not null default 0 check (disabled in (0, 1)),
    created_at integer not null,
    updated_at integer not null
);

-- Usernames are unique regardless of case ("Alice" and "alice" are one person).
create unique index user_username_key on user (lower(username));
