-- Durable Streams (PROTOCOL.md v1.0, src/durable/): streams created, appended to and read by the protocol's
-- clients at /v1/stream/{path}. Expand-only: new tables, nothing of an older version reads or writes them.

-- One row per stream incarnation. A soft-deleted stream (deleted while forks still read its data) keeps its
-- row and its path; a stream deleted outright, or expired with no fork, loses both.
create table ds_streams (
    id bigint generated always as identity primary key,
    path text not null unique,
    content_type text not null,
    -- `application/json`: one message per position, a read returns them as one JSON array.
    json_mode boolean not null,
    -- Sliding: the stream expires `ttl_seconds` after its last read or write (`accessed_at`).
    ttl_seconds bigint check (ttl_seconds >= 0),
    -- Absolute.
    expires_at timestamptz,
    accessed_at timestamptz not null default now(),
    -- The tail: the position after the last byte (or JSON message). Positions are the stream's offsets.
    tail bigint not null default 0 check (tail >= 0),
    -- The last `Stream-Seq` accepted (compared bytewise: collate "C").
    last_stream_seq text collate "C",
    closed boolean not null default false,
    -- The producer request that closed it, so its retry is answered as a duplicate.
    closed_by_producer text,
    closed_by_epoch bigint,
    closed_by_seq bigint,
    -- A fork reads `fork_of`'s data below `fork_position` (the source's own offsets), its own from there on.
    fork_of bigint references ds_streams (id),
    fork_position bigint,
    deleted boolean not null default false,
    created_at timestamptz not null default now(),
    check ((fork_of is null) = (fork_position is null)),
    check (ttl_seconds is null or expires_at is null)
);

create index ds_streams_forks on ds_streams (fork_of) where fork_of is not null;

-- A stream's data: contiguous, non-overlapping ranges `[start_position, end_position)`. A byte stream's row
-- is one append (positions count bytes), a JSON stream's one message (positions count messages);
-- `batch_end` is where the append it came in ends (a fork's sub-offset slices that append).
create table ds_messages (
    stream_id bigint not null references ds_streams (id) on delete cascade,
    end_position bigint not null,
    start_position bigint not null,
    batch_end bigint not null,
    data bytea not null,
    primary key (stream_id, end_position),
    check (end_position > start_position and batch_end >= end_position)
);

-- Idempotent producers' state, committed with the append it admits.
create table ds_producers (
    stream_id bigint not null references ds_streams (id) on delete cascade,
    producer_id text not null,
    epoch bigint not null,
    last_seq bigint not null,
    primary key (stream_id, producer_id)
);

-- Whether a stream is past its TTL or its expiry time: the one definition every query uses.
create function ds_expired(ttl_seconds bigint, expires_at timestamptz, accessed_at timestamptz) returns boolean
language sql stable as $$
    select coalesce(expires_at <= now(), false)
        or coalesce(accessed_at + make_interval(secs => ttl_seconds) <= now(), false)
$$;
