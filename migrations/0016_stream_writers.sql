-- A stream's end is ordered after every line received before it (src/streams/completion.rs).
--
-- `stream_writers` lists the chunk POSTs open right now, on any replica: a row is added when a POST starts
-- (before its body is read) and removed when it ends. A `POST /stream/{id}/complete` that finds writers
-- does not append `[DONE]` itself: it records `complete_requested_at` and the writers' replicas append it,
-- each after the lines its POST received. Unlogged: the rows matter only while their POSTs are open, and a
-- PostgreSQL crash ends those POSTs too; skipping the WAL keeps a POST's start and end cheap.
create unlogged table stream_writers (
    writer_id uuid primary key,
    stream_id text not null,
    -- the liveness key of the replica holding the POST: a session advisory lock its LISTEN connection holds
    -- while it lives, so a writer row of a replica that died is recognised (pg_locks) and ignored.
    replica_key bigint not null,
    opened_at timestamptz not null default now()
);

create index stream_writers_stream_idx on stream_writers (stream_id);

alter table streams add column complete_requested_at timestamptz;

create index streams_complete_requested_idx on streams (complete_requested_at)
    where complete_requested_at is not null;
