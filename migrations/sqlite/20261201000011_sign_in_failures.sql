-- Failed sign-ins, shared by every replica: the throttle counts them per account and per client
-- address over a sliding window (rows older than the window are deleted as new ones arrive).
create table sign_in_failure (
    sign_in_failure_id integer primary key,
    account text not null,
    address text,
    at integer not null
);
create index sign_in_failure_by_account on sign_in_failure (account, at);
create index sign_in_failure_by_address on sign_in_failure (address, at);
create index sign_in_failure_by_time on sign_in_failure (at);
