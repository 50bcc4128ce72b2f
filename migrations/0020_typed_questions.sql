-- Typed questions and declines (issue 26). Expand-only: every old row reads as before.
alter table questions
    -- the form an answer fills: MCP elicitation's restricted JSON Schema (a flat object); null: free text
    add column response_schema jsonb,
    -- the answer as JSON: an object for a typed question, a JSON string otherwise; `response` keeps its text
    -- (a typed answer's compact JSON) for reports. Null on rows answered before this column existed.
    add column response_value jsonb,
    -- why the person declined, when they said
    add column decline_reason text;

-- `declined`: the person refused to answer (distinct from `cancelled`, the asker withdrawing it).
alter table questions drop constraint questions_status_check;
alter table questions add constraint questions_status_check
    check (status in ('pending', 'answered', 'cancelled', 'expired', 'declined'));

-- A decline is a change watchers see and an event of its Query's unified stream.
alter table question_events drop constraint question_events_kind_check;
alter table question_events add constraint question_events_kind_check
    check (kind in ('question_created', 'question_answered', 'question_cancelled', 'question_expired',
                    'question_updated', 'question_declined'));
alter table chunks drop constraint chunks_event_type_check;
alter table chunks add constraint chunks_event_type_check check (event_type in (
    'text_delta', 'tool_call_start', 'tool_call_result', 'question_raised', 'question_answered',
    'question_cancelled', 'question_expired', 'question_declined', 'phase_change', 'completed_query',
    'stream_aborted'));

-- The outcome reports count declines too (a column added at the end: the views' contract only grows).
create or replace view report_question_outcomes_by_sender as
select sender,
       count(*) filter (where status = 'answered') as answered,
       count(*) filter (where status = 'expired') as expired,
       count(*) filter (where status = 'cancelled') as cancelled,
       count(*) filter (where status = 'pending') as pending,
       count(*) as total,
       count(*) filter (where status = 'declined') as declined
from questions
group by sender;

create or replace view report_question_outcomes_by_channel as
select channel,
       count(*) filter (where status = 'answered') as answered,
       count(*) filter (where status = 'expired') as expired,
       count(*) filter (where status = 'cancelled') as cancelled,
       count(*) filter (where status = 'pending') as pending,
       count(*) as total,
       count(*) filter (where status = 'declined') as declined
from questions
cross join lateral unnest(case when cardinality(channels) = 0 then array['(none)'] else channels end) as channel
group by channel;
