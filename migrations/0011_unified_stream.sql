-- The unified execution stream (seed 002), the resume state the controller asks for after a restart
-- (seed 001), and aborted streams (seed 004).

-- Typed events live in their Query's stream beside the OpenAI chunks, at positions drawn from the same
-- counter row, so every reader gets them in order with the chunks. `event_type` is null for OpenAI chunks
-- and the completion marker. OpenAI-format readers and the raw `GET /stream` feed see no typed rows, except
-- `stream_aborted`: the error frame the broker appends when a stream's writer disconnected and never came back.
alter table chunks add column event_type text check (event_type in (
    'text_delta', 'tool_call_start', 'tool_call_result', 'question_raised', 'question_answered',
    'question_cancelled', 'question_expired', 'phase_change', 'completed_query', 'stream_aborted'));

create index chunks_stream_events_idx on chunks (stream_id, event_type, position) where event_type is not null;

alter table streams
    -- a chunk POST to the stream broke mid-body (a reset, not a clean end) and nothing was written since
    add column writer_lost_at timestamptz,
    -- the grace period after that passed without a write: the abort frame was appended
    add column aborted_at timestamptz;

create index streams_writer_lost_idx on streams (writer_lost_at) where writer_lost_at is not null;

-- A stream's phase as the broker knows it: completed once `/complete` was called, otherwise the `to` of
-- its latest `phase_change` (the broker's own around questions, or the controller's), otherwise running.
create view stream_phases as
select s.stream_id,
       case when s.completed_at is not null then 'completed' else coalesce(p.phase, 'running') end as phase,
       coalesce(s.completed_at, p.since, s.created_at) as since,
       s.aborted_at is not null as aborted
from streams s
left join lateral (
    select c.chunk -> 'data' ->> 'to' as phase, c.created_at as since
    from chunks c
    where c.stream_id = s.stream_id and c.event_type = 'phase_change'
    order by c.position desc
    limit 1
) p on true
where s.last_position > s.purged_position;

-- What a restarted controller needs to resume a Query (GET /queries/{namespace}/{name}/state reads this).
-- `namespace` is null for questions whose caller named only the Query's name (the API falls back to them).
-- The question the Query is blocked on: its oldest pending question, else its latest closed one whose tool
-- call has no `tool_call_result` in the stream yet (while the stream is not completed). `can_resume` once
-- that question has an outcome (answered, cancelled or expired). The tool_call_id ↔ task_id mapping is the
-- question's own `tool_call_id` (from `ask_question`'s `toolCallId` or the controller's PUT).
create view query_resume_states as
with queries as (
    select distinct query_namespace as namespace, query_name as name
    from questions
    where query_name is not null
), blocking as (
    select distinct on (q.query_namespace, q.query_name)
           q.query_namespace, q.query_name, q.id, q.task_id, q.tool_call_id, q.status, q.created_at
    from questions q
    where q.query_name is not null
      and (q.status = 'pending'
           or (not exists (select 1 from streams s where s.stream_id = q.query_name and s.completed_at is not null)
               and not exists (select 1 from chunks c
                               where c.stream_id = q.query_name and c.event_type = 'tool_call_result'
                                 and c.chunk -> 'data' ->> 'tool_call_id' = q.tool_call_id)))
    order by q.query_namespace, q.query_name, (q.status = 'pending') desc,
             case when q.status = 'pending' then q.sequence_number end,
             q.closed_at desc
)
select k.namespace,
       k.name,
       case when b.status = 'pending' then 'waiting' else coalesce(p.phase, 'running') end as phase,
       b.id as question_id,
       b.task_id,
       b.tool_call_id,
       b.status as question_status,
       case when b.status = 'pending' then b.created_at end as waiting_since,
       coalesce(b.status <> 'pending', false) as can_resume
from queries k
left join blocking b on b.query_namespace is not distinct from k.namespace and b.query_name = k.name
left join stream_phases p on p.stream_id = k.name;

-- The tool_call_id ↔ task_id mapping, for SQL: which LLM tool call of which Query each MCP task answers.
create view tool_call_tasks as
select query_namespace as namespace, query_name as name, tool_call_id, task_id, id as question_id, status
from questions
where task_id is not null and tool_call_id is not null;

-- Only where the reporting role exists (see 0004; amended after release, recorded under its first checksum).
do $$
begin
    if exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        grant select on stream_phases, query_resume_states, tool_call_tasks to ark_broker_reporting;
    end if;
end
$$;
