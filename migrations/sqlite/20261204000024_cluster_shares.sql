-- Per-cluster share overrides: a node's share on one cluster, set through a change request for
-- that cluster. Where none is in force the node's share (share_version) applies on every cluster.
-- A change for every cluster ends the overrides of the children it sets.
create table share_override (
    share_override_id integer primary key,
    budget_node_id integer not null references budget_node (budget_node_id),
    cluster_id integer not null references cluster (cluster_id),
    share real not null check (share >= 0),
    effective_from integer not null,
    effective_to integer,
    change_request_id integer references change_request (change_request_id)
);
create index share_override_by_node on share_override (budget_node_id, cluster_id, effective_from);

-- The cluster a change request is for (null: every cluster).
alter table change_request add column cluster_id integer references cluster (cluster_id);
