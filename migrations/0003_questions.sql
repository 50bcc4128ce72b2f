-- Questions agents ask people (MCP `ask_question`, `POST /questions`), answered from any replica.
-- Real columns throughout, so people can report on them with SQL (see docs/reporting.md).

-- resourceVersion: one sequence for every change to any question. Writers draw it under the questions
-- feed's advisory lock, so versions commit in order and a watch that resumes from N misses nothing.
create sequence question_versions as bigint;

create table questions (
    id text primary key check (id ~ '^q-[0-9a-f-]{36}$'),
    -- creation order; the page cursor of GET /questions
    sequence_number bigserial not null unique,
    sender text not null check (sender ~ '^ark://(agents|users|teams|channels)/[^/[:space:]]+$'),
    recipient text not null check (recipient ~ '^ark://(agents|users|teams|channels)/[^/[:space:]]+$'),
    channels text[] not null default '{}',
    content text not null,
    status text not null default 'pending' check (status in ('pending', 'answered', 'cancelled', 'expired')),
    response text,
    answered_by text,
    created_at timestamptz not null default now(),
    answered_at timestamptz,
    -- when it stopped being pending (answered, cancelled or expired)
    closed_at timestamptz,
    -- pending questions past this instant expire
    expires_at timestamptz,
    -- the asking Query and tool call, when known
    query_namespace text,
    query_name text,
    tool_call_id text,
    -- the MCP task that waits for the answer, when there is one (a bearer token: 122 random bits)
    task_id uuid unique,
    -- the version of the last change
    resource_version bigint not null,
    check ((status = 'answered') = (response is not null and answered_at is not null)),
    check ((status = 'pending') = (closed_at is null))
);

create index questions_status_idx on questions (status, sequence_number);
create index questions_recipient_idx on questions (recipient, status);
create index questions_sender_idx on questions (sender, status);
create index questions_query_idx on questions (query_namespace, query_name) where query_name is not null;
create index questions_expiry_idx on questions (expires_at) where status = 'pending' and expires_at is not null;
create index questions_version_idx on questions (resource_version);

-- The watch log: one row per change, with the question as it was after the change. Old rows are pruned;
-- a watch from a version older than what is kept gets 410 Gone and relists.
create table question_events (
    resource_version bigint primary key,
    question_id text not null references questions (id),
    kind text not null check (kind in ('question_created', 'question_answered', 'question_cancelled', 'question_expired')),
    question jsonb not null,
    created_at timestamptz not null default now()
);

create index question_events_created_idx on question_events (created_at);
