-- LLM chunk streams (upstream's /stream routes), durable in Postgres.
-- `streams` knows which stream ids were ever written and whether they were completed;
-- `chunks` holds every chunk and the completion marker, in one global sequence (the `GET /stream` feed).
create table streams (
    stream_id text primary key,
    created_at timestamptz not null default now(),
    completed_at timestamptz
);

create table chunks (
    sequence_number bigserial primary key,
    stream_id text not null,
    -- `json`, not `jsonb`: chunks are opaque and are served back byte for byte as they were sent.
    chunk json not null,
    -- true for the marker `POST /stream/{id}/complete` appends; readers send `[DONE]` and end there.
    is_done boolean not null default false,
    created_at timestamptz not null default now()
);

create index chunks_stream_idx on chunks (stream_id, sequence_number);
