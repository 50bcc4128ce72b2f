-- The record of each question's decision (issue 26): every step in order, each with its time, who and via
-- which channel. Written in the same transaction as the change it records; kept for
-- --question-history-seconds (90 days by default), longer than the watch log. No foreign key: a step
-- outlives nothing it names, and reports read it alone.
create table question_history (
    id bigserial primary key,
    question_id text not null,
    step text not null check (step in ('created', 'delivered', 'delivery_failed', 'reminded', 'escalated',
                                       'refused', 'answered', 'declined', 'expired', 'cancelled')),
    at timestamptz not null default now(),
    -- who: the asker (created), the person who answered, declined or was refused; 'system:…' for the broker
    actor text,
    -- via which channel: api, page, mcp, slack:<channel>, github:<owner>/<repo>#<n>
    channel text,
    -- what: the answer, a reason, a delivery's error or message, the asking Query
    detail jsonb
);

create index question_history_question_idx on question_history (question_id, id);
create index question_history_at_idx on question_history (at);

-- One row per decided question: how it ended, when, by whom and through what, and how long it took.
create view report_question_decisions as
select d.question_id,
       c.actor as asked_by,
       c.detail ->> 'recipient' as recipient,
       c.detail -> 'query' ->> 'namespace' as query_namespace,
       c.detail -> 'query' ->> 'name' as query_name,
       c.at as asked_at,
       d.step as outcome,
       d.at as decided_at,
       d.actor as decided_by,
       d.channel as decided_via,
       d.detail -> 'response' as response,
       d.detail ->> 'reason' as reason,
       extract(epoch from d.at - c.at)::double precision as seconds_to_decision
from question_history d
left join lateral (
    select actor, at, detail from question_history c
    where c.question_id = d.question_id and c.step = 'created'
    order by c.id limit 1
) c on true
where d.step in ('answered', 'declined', 'expired', 'cancelled');

-- The reporting role reads the record and its report (where the role exists; see 0004).
do $$
begin
    if exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        grant select on question_history, report_question_decisions to ark_broker_reporting;
    end if;
end
$$;
