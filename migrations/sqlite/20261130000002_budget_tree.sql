-- The budget tree: root = the cluster (path ''), inner nodes = programs, leaves = projects or people.
-- Nodes are never deleted (history must stay recomputable); a removed node gets `removed_at`.
create table budget_node (
    budget_node_id integer primary key,
    parent_id integer references budget_node (budget_node_id),
    name text not null,
    path text not null unique,
    created_at integer not null,
    removed_at integer
);

-- Every share a node ever had, with the interval it was in force ([effective_from, effective_to),
-- effective_to null = still in force), so any past day's allocation can be recomputed exactly.
create table share_version (
    share_version_id integer primary key,
    budget_node_id integer not null references budget_node (budget_node_id),
    share real not null check (share >= 0),
    effective_from integer not null,
    effective_to integer
);
create index share_version_by_node on share_version (budget_node_id, effective_from);

-- Owners decide on a node's children (managers); members may charge work to a leaf.
create table budget_owner (
    budget_node_id integer not null references budget_node (budget_node_id),
    user_id integer not null references user (user_id),
    primary key (budget_node_id, user_id)
);

create table budget_member (
    budget_node_id integer not null references budget_node (budget_node_id),
    user_id integer not null references user (user_id),
    primary key (budget_node_id, user_id)
);
