-- Names one registration of a node, in this database and no other: an agent whose state directory
-- holds another key drops that state (its runs belong to another server). Node ids and seconds
-- repeat across databases; a random key does not. Rows from before keep '' and their old key.
alter table node add column registration_key text not null default '';
