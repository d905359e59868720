-- Scheduler settings changed on the Settings page (absent keys use the built-in defaults), and
-- the audit of every change.
create table setting (
    key text primary key,
    value text not null,
    updated_at integer not null,
    updated_by integer references user (user_id)
);

create table setting_change (
    setting_change_id integer primary key,
    key text not null,
    old_value text not null,
    new_value text not null,
    changed_at integer not null,
    changed_by integer not null references user (user_id)
);
