-- Questions delivered to Slack and GitHub.
--
-- channel_deliveries is an outbox: the transaction that asks a question inserts one row per channel, and one
-- replica at a time claims a due row (`for update skip locked`, leased by pushing next_attempt_at forward),
-- sends the message, and records the outcome, retrying with backoff. The unique key keeps it to one
-- delivery per channel per question.
alter table questions add column options text[] not null default '{}';
-- The deliveries as the API shows them, kept in step by the replica that changes one (so every read of a
-- question has them without a join).
alter table questions add column deliveries jsonb not null default '[]';

create table channel_deliveries (
    id bigserial primary key,
    question_id text not null references questions (id) on delete cascade,
    -- `slack:<channel>` or `github:<owner>/<repo>#<number>`, as the question names it
    channel text not null,
    status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
    attempts integer not null default 0,
    next_attempt_at timestamptz not null default now(),
    last_error text,
    -- a link to the message, and what the channel needs to find it again (Slack: channel and ts)
    message_url text,
    message_ref jsonb,
    delivered_at timestamptz,
    created_at timestamptz not null default now(),
    unique (question_id, channel)
);

create index channel_deliveries_due_idx on channel_deliveries (next_attempt_at) where status = 'pending';

create view question_deliveries as
select d.question_id, q.query_namespace, q.query_name, d.channel, d.status, d.attempts, d.last_error,
       d.message_url, d.created_at, d.delivered_at
from channel_deliveries d join questions q on q.id = d.question_id;

-- Only where the reporting role exists (see 0004; amended after release, recorded under its first checksum).
do $$
begin
    if exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        grant select on question_deliveries to ark_broker_reporting;
    end if;
end
$$;

-- Inbound deliveries seen (GitHub's X-GitHub-Delivery, Slack's event_id): a retried delivery is acknowledged
-- and not acted on twice, whichever replica it reaches.
create table inbound_deliveries (
    source text not null,
    delivery_id text not null,
    received_at timestamptz not null default now(),
    primary key (source, delivery_id)
);
