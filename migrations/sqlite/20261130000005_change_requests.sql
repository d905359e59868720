-- Budget change requests: a proposal of new shares (and added/renamed/removed children) for the
-- children of one node, decided by that node's owners. `children_version` counts applied changes
-- to a node's children; a request based on an older version is stale and must be rebased.
alter table budget_node add column children_version integer not null default 0;

create table change_request (
    change_request_id integer primary key,
    budget_node_id integer not null references budget_node (budget_node_id),
    proposer_id integer not null references user (user_id),
    justification text not null,
    base_version integer not null,
    effective_at integer,
    state text not null check (state in ('pending', 'scheduled', 'applied', 'rejected', 'stale')),
    created_at integer not null,
    decided_at integer,
    decided_by integer references user (user_id),
    decision_comment text not null default '',
    applied_at integer
);
create index change_request_by_state on change_request (state, budget_node_id);

-- One child of the node per row: its share before and after, and what happens to it.
create table change_request_item (
    change_request_id integer not null references change_request (change_request_id),
    child_name text not null,
    action text not null check (action in ('set', 'add', 'rename', 'remove')),
    old_share real,
    new_share real,
    new_name text,
    primary key (change_request_id, child_name)
);
