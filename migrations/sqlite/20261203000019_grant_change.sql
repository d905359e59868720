-- Who became or stopped being a member or owner of a tree node, by whom and when: the node's
-- people history. `changed_by` is null for `admin import-tree`.
create table grant_change (
    grant_change_id integer primary key,
    budget_node_id integer not null references budget_node (budget_node_id),
    grant_kind text not null check (grant_kind in ('member', 'owner')),
    added integer not null,
    user_id integer not null references user (user_id),
    changed_by integer references user (user_id),
    changed_at integer not null
);
create index grant_change_by_node on grant_change (budget_node_id, changed_at);
