-- Execution events (upstream's POST /events), the sessions derived from them, and OTLP spans.
--
-- Events and spans are feeds like messages (src/db/feed.rs): one query's events and one trace's spans get
-- positions from a counter row updated in the writing transaction (per-key order), and every row carries its
-- transaction id (global order below the visibility horizon). The JSON as served is kept whole; what reports
-- and filters use is copied into real columns.

create table event_queries (
    query_id text primary key,
    last_position bigint not null default 0,
    last_tx xid8 not null default '0'
);

create table events (
    sequence_number bigserial primary key,
    -- data.queryId: the Query's UID
    query_id text not null,
    query_name text,
    query_namespace text,
    session_id text,
    reason text,
    -- Normal | Warning
    event_type text,
    -- the event's own timestamp, when it parses
    occurred_at timestamptz,
    -- data.durationMs, when it is a number (the controller sends it as a string)
    duration_ms double precision,
    -- the body as posted, without ttl_seconds
    event jsonb not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    position bigint not null,
    tx xid8 not null default pg_current_xact_id(),
    bytes integer not null
);

create unique index events_query_position_idx on events (query_id, position);
create index events_session_idx on events (session_id, sequence_number);
create index events_tx_idx on events (tx, sequence_number);
create index events_expires_idx on events (expires_at);
create index events_reason_created_idx on events (reason, created_at);

-- Sessions: upstream keeps them in each process's memory; here they are rows, changed in the transaction of
-- the event (or message) that changes them, so every replica serves the same sessions. `tx` is the last
-- writer's transaction: the sessions watch follows rows in (tx, sequence) order below the horizon, so a
-- changed session is delivered again with its new state.
create table sessions (
    session_id text primary key,
    sequence bigserial not null unique,
    name text not null,
    -- active | idle | error
    status text not null,
    error_count integer not null,
    -- distinct conversation ids of its queries (sort=conversations)
    conversation_count integer not null,
    participants jsonb not null,
    conversations jsonb not null,
    created_at timestamptz not null,
    last_activity timestamptz not null,
    tx xid8 not null default pg_current_xact_id()
);

create index sessions_tx_idx on sessions (tx, sequence);
create index sessions_last_activity_idx on sessions (last_activity);

create table session_queries (
    session_id text not null references sessions on delete cascade,
    query_name text not null,
    -- the order queries joined their session (upstream's object key order)
    ordinal bigserial not null,
    namespace text,
    conversation_id text,
    agent text,
    team text,
    tool text,
    target_type text not null,
    -- pending | running | done | error | canceled | unknown
    phase text not null,
    error text,
    created_at timestamptz not null,
    completed_at timestamptz,
    last_activity timestamptz not null,
    primary key (session_id, query_name)
);

create index session_queries_name_idx on session_queries (query_name, created_at);

-- Spans, in upstream's stored form (base64 ids and enum names for protobuf exports).
create table traces (
    trace_id text primary key,
    last_position bigint not null default 0,
    last_tx xid8 not null default '0'
);

create table spans (
    sequence_number bigserial primary key,
    trace_id text not null,
    span_id text,
    parent_span_id text,
    name text,
    -- attribute ark.session.id ({stringValue} or a plain string)
    session_id text,
    -- attribute query.name
    query_name text,
    start_time timestamptz,
    end_time timestamptz,
    span jsonb not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    position bigint not null,
    tx xid8 not null default pg_current_xact_id(),
    bytes integer not null
);

create unique index spans_trace_position_idx on spans (trace_id, position);
create index spans_session_idx on spans (session_id, trace_id);
create index spans_tx_idx on spans (tx, sequence_number);
create index spans_expires_idx on spans (expires_at);

-- A session with its queries (as JSON, in the order they joined), for reads that need both from one snapshot.
create view session_entries as
select s.session_id, s.sequence, s.name, s.status, s.error_count, s.conversation_count, s.participants,
       s.conversations, s.created_at, s.last_activity, s.tx,
       coalesce((select jsonb_agg(jsonb_build_object(
                    'name', q.query_name, 'namespace', q.namespace, 'conversation_id', q.conversation_id,
                    'agent', q.agent, 'team', q.team, 'tool', q.tool, 'target_type', q.target_type,
                    'phase', q.phase, 'error', q.error, 'created_at', q.created_at,
                    'completed_at', q.completed_at, 'last_activity', q.last_activity) order by q.ordinal)
                 from session_queries q where q.session_id = s.session_id), '[]'::jsonb) as queries
from sessions s;
