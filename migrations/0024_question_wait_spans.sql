-- The human wait in the asking Query's trace (issue 26): a question asked with a W3C trace context
-- (`traceparent`: MCP `_meta` or the HTTP header) remembers it here, in the question's own transaction. The
-- change that closes the question (answered, declined, expired, cancelled; on whichever replica) deletes the
-- row and writes the span `execute_tool ask_question` in the same transaction, so the span is written exactly
-- once, across replicas and restarts. Expand-only: a replica of the previous version neither writes nor reads it.
create table question_wait_spans (
    question_id text primary key references questions (id) on delete cascade,
    -- the caller's context, normalised to version 00: 00-<trace id>-<parent span id>-<flags>
    trace_parent text not null,
    -- when the wait began (the question's creation, same transaction)
    asked_at timestamptz not null default now(),
    -- how long the span is kept once written (--span-ttl-seconds of the asking replica)
    span_ttl_seconds bigint not null
);
