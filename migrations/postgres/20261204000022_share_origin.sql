-- Where each share version came from: the node's creation, an approved change request (named),
-- or an admin's import of the tree file. Versions applied before this was recorded are matched
-- to the request applied at the same moment on the node's parent.
alter table share_version add column source text not null default 'import'
    check (source in ('created', 'request', 'import'));
alter table share_version add column change_request_id bigint references change_request (change_request_id);
update share_version set source = 'request', change_request_id = (
    select r.change_request_id from change_request r
    join budget_node b on b.parent_id = r.budget_node_id
    where b.budget_node_id = share_version.budget_node_id and r.applied_at = share_version.effective_from
      and r.state = 'applied'
    order by r.change_request_id limit 1)
where exists (
    select 1 from change_request r join budget_node b on b.parent_id = r.budget_node_id
    where b.budget_node_id = share_version.budget_node_id and r.applied_at = share_version.effective_from
      and r.state = 'applied');
