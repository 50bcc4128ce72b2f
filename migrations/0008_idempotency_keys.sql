-- Idempotency-Key on POST /messages and POST /stream/{id}: a retried request has exactly one effect, on any
-- replica, for 24 hours (the reaper deletes older keys), and gets the first reply.
--
-- `POST /messages` writes its key row in the append's own transaction, with the reply: a retry either finds
-- the committed row (and answers from it) or waits on the first one's uncommitted row and then does.
-- `POST /stream/{id}` is long: its key row also counts the request's lines stored so far (`lines_stored`),
-- bumped in the transaction that stores them, so a retry after a failure stores only the lines beyond.
create table idempotency_keys (
    -- 'messages' or 'stream'
    scope text not null,
    key text not null,
    -- what the key was first used for (the messages body's md5, the stream id); another request under the
    -- same key is refused
    fingerprint text not null,
    lines_stored bigint not null default 0,
    -- the final reply, once there is one (503s are not stored: a retry must be able to succeed)
    status smallint,
    body jsonb,
    created_at timestamptz not null default now(),
    primary key (scope, key)
);

create index idempotency_keys_created_at on idempotency_keys (created_at);
