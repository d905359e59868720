-- A proposer may withdraw a pending request (or one gone stale); a rebased request is withdrawn
-- in favour of its successor, named by `replaced_by`. SQLite cannot change a check constraint, so
-- both tables are rebuilt: items first, so that no row ever points at a dropped request.
create table change_request_new (
    change_request_id integer primary key,
    budget_node_id integer not null references budget_node (budget_node_id),
    proposer_id integer not null references user (user_id),
    justification text not null,
    base_version integer not null,
    effective_at integer,
    state text not null check (state in ('pending', 'scheduled', 'applied', 'rejected', 'stale', 'withdrawn')),
    created_at integer not null,
    decided_at integer,
    decided_by integer references user (user_id),
    decision_comment text not null default '',
    applied_at integer,
    replaced_by integer references change_request_new (change_request_id)
);
insert into change_request_new (change_request_id, budget_node_id, proposer_id, justification,
    base_version, effective_at, state, created_at, decided_at, decided_by, decision_comment, applied_at)
select change_request_id, budget_node_id, proposer_id, justification, base_version, effective_at,
    state, created_at, decided_at, decided_by, decision_comment, applied_at
from change_request;

create table change_request_item_new (
    change_request_id integer not null references change_request_new (change_request_id),
    child_name text not null,
    action text not null check (action in ('set', 'add', 'rename', 'remove')),
    old_share real,
    new_share real,
    new_name text,
    primary key (change_request_id, child_name)
);
insert into change_request_item_new select change_request_id, child_name, action, old_share, new_share, new_name
from change_request_item;

drop table change_request_item;
drop table change_request;
-- Renaming rewrites the references to it (in change_request_item_new and its own replaced_by).
alter table change_request_new rename to change_request;
alter table change_request_item_new rename to change_request_item;
create index change_request_by_state on change_request (state, budget_node_id);
