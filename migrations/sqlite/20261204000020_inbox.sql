-- When each person last read their inbox: notifications after it count as unread.
alter table "user" add column inbox_seen_at integer;
