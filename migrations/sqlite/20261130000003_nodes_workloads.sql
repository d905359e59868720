-- GPU hosts. `admin_state` is what an admin set; `down_since` is set when heartbeats stop and
-- cleared when the agent comes back. The engine's health is derived from both.
create table node (
    node_id integer primary key,
    name text not null unique,
    gpu_model text not null default '',
    gpu_count integer not null default 0 check (gpu_count between 0 and 64),
    admin_state text not null default 'healthy' check (admin_state in ('healthy', 'cordoned', 'unhealthy')),
    agent_healthy integer not null default 1,
    down_since integer,
    token_hash text not null unique,
    registered_at integer not null,
    last_heartbeat_at integer
);

-- A workload and its current state. `gpu_indices` is ';'-separated per node in the current run.
create table workload (
    workload_id integer primary key,
    user_id integer not null references user (user_id),
    budget_node_id integer not null references budget_node (budget_node_id),
    name text not null,
    command text not null,
    gpus integer not null check (gpus > 0),
    min_runtime_s integer not null check (min_runtime_s >= 0),
    resumable integer not null,
    priority integer not null default 0,
    state text not null check (state in ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'preempted')),
    submitted_at integer not null,
    queued_at integer not null,
    first_started_at integer,
    started_at integer,
    protected_until integer,
    ended_at integer,
    exit_code integer,
    run_count integer not null default 0,
    progress_s integer not null default 0,
    cancel_requested integer not null default 0,
    log_tail text not null default ''
);
create index workload_by_state on workload (state, submitted_at);
create index workload_by_user on workload (user_id, submitted_at);

-- One row per contiguous run of a workload on one host: the timeline and the charging cursor.
-- `charged_through` moves forward in the same transaction that books the usage, so charging is
-- idempotent across restarts and retries.
create table workload_run (
    workload_run_id integer primary key,
    workload_id integer not null references workload (workload_id),
    node_id integer not null references node (node_id),
    gpu_indices text not null,
    gpus integer not null,
    allocated integer not null,
    started_at integer not null,
    protected_until integer,
    charged_through integer not null,
    ended_at integer,
    end_kind text check (end_kind in ('completed', 'failed', 'preempted', 'drained', 'killed', 'cancelled'))
);
create index workload_run_open on workload_run (ended_at, node_id);
create index workload_run_by_workload on workload_run (workload_id);

-- Every state change, with the engine's reason data as JSON (not a sentence).
create table workload_event (
    workload_event_id integer primary key,
    workload_id integer not null references workload (workload_id),
    at integer not null,
    kind text not null,
    node_id integer references node (node_id),
    detail text not null default '{}'
);
create index workload_event_by_workload on workload_event (workload_id, workload_event_id);

-- The ledger: per leaf and hour, what was charged, run for free, and demanded (for "owed").
create table usage_hour (
    budget_node_id integer not null references budget_node (budget_node_id),
    hour integer not null,
    charged_gpu_s real not null default 0,
    unallocated_gpu_s real not null default 0,
    demand_gpu_s real not null default 0,
    primary key (budget_node_id, hour)
);

-- Healthy capacity per hour, in GPU-seconds.
create table capacity_hour (
    hour integer primary key,
    healthy_gpu_s real not null default 0
);

-- How far the demand and capacity integrals have been booked.
create table ledger_cursor (
    name text primary key,
    through integer not null
);

-- Personal API tokens for scripts (`Authorization: Bearer …`); stored hashed.
create table api_token (
    api_token_id integer primary key,
    user_id integer not null references user (user_id),
    name text not null,
    token_hash text not null unique,
    created_at integer not null,
    last_used_at integer,
    revoked_at integer
);
