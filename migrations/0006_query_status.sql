-- The asking Query's status while a question waits.
--
-- query_status_patches is an outbox: the question change that makes a Query wait (or resume) inserts the
-- patch to make in the same transaction, and one replica claims it (`for update skip locked`) and makes it,
-- retrying with backoff until it is done or moot. So each patch is made once across replicas, survives a
-- replica dying, and never delays the answer.
create table query_status_patches (
    id bigserial primary key,
    question_id text not null references questions (id),
    query_namespace text not null,
    query_name text not null,
    action text not null check (action in ('wait', 'resume')),
    created_at timestamptz not null default now(),
    attempts integer not null default 0,
    -- claimed patches are leased by pushing this forward; a replica that dies mid-patch loses the lease
    next_attempt_at timestamptz not null default now(),
    done_at timestamptz,
    -- patched | skipped: … | gave up: …
    outcome text,
    last_error text
);

create index query_status_patches_due_idx on query_status_patches (next_attempt_at) where done_at is null;
create index query_status_patches_question_idx on query_status_patches (question_id, id);

-- waitingFor, as recorded in Postgres: which Query waits on which question, since when.
create view query_waiting_for as
select query_namespace as namespace,
       query_name as name,
       created_at as since,
       id as question_id,
       task_id,
       tool_call_id
from questions
where status = 'pending' and query_name is not null and query_namespace is not null;
