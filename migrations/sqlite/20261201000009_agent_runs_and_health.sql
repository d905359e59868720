-- The agent's exactly-once protocol and its health reports.
--
-- `answers_sent` numbers the sync answers that hand out runs; a run remembers the answer that
-- carried it (`sent_answer`), and the agent says which answer it last acted on, so a run is sent
-- again only if its answer never arrived. `released_at` is when the node said the run's processes
-- were gone: until then its GPUs are not handed to another run. `log_received` is the byte offset
-- of the run's output received so far (output travels in chunks and resumes from there).
-- `syncs` numbers the sync requests: only the newest may hand out runs, so a long poll the agent
-- gave up on cannot hand out a run behind the back of the request that replaced it.
alter table node add column answers_sent integer not null default 0;
alter table node add column syncs integer not null default 0;
alter table node add column health_reason text;
alter table node add column unhealthy_since integer;
alter table workload_run add column sent_answer integer;
alter table workload_run add column released_at integer;
alter table workload_run add column log_received integer not null default 0;
