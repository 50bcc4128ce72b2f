-- Conversation memory (upstream's Memory API). One row per message; `sequence_number` orders the global feed.
-- Writers take the messages feed's advisory lock before drawing a sequence number, so sequence order is
-- commit order and a reader that advances past N never misses a row below N.
create table messages (
    sequence_number bigserial primary key,
    conversation_id text not null,
    query_id text not null,
    message jsonb not null,
    created_at timestamptz not null default now(),
    -- null: kept until deleted; otherwise hidden from reads once passed (ttl_seconds on POST /messages).
    expires_at timestamptz
);

create index messages_conversation_idx on messages (conversation_id, sequence_number);
create index messages_query_idx on messages (query_id, sequence_number);
create index messages_expires_idx on messages (expires_at) where expires_at is not null;
