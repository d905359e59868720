-- The scheduler lease: of several server replicas on one database, the one holding an unexpired
-- lease decides. `epoch` grows with each change of holder (fencing); `wake_seq` is bumped by
-- replicas that need a decision soon, `assign_seq` by the leader when assignments change.
create table scheduler_lease (
    name text primary key,
    holder text not null default '',
    epoch integer not null default 0,
    expires_at_ms integer not null default 0,
    wake_seq integer not null default 0,
    assign_seq integer not null default 0
);
insert into scheduler_lease (name) values ('scheduler');
