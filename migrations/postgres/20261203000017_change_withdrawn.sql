-- A proposer may withdraw a pending request (or one gone stale); a rebased request is withdrawn
-- in favour of its successor, named by `replaced_by`.
alter table change_request drop constraint change_request_state_check;
alter table change_request add constraint change_request_state_check
    check (state in ('pending', 'scheduled', 'applied', 'rejected', 'stale', 'withdrawn'));
alter table change_request add column replaced_by bigint references change_request (change_request_id);
