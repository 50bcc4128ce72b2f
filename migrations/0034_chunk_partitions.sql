-- Step 3 of 3: `chunks` becomes partitioned (docs/retention.md), in one short transaction whose locks are
-- taken on tables nobody scans meanwhile: no row is copied, the table of before is attached whole as lane 2
-- (step 2 proved it holds lane 2 only), and replicas of the previous version keep writing and reading
-- `chunks` (PostgreSQL re-resolves a prepared statement's table after DDL; the columns they name are all
-- here). New rows take lane 0 and go to the bucket of their `created_at`; the broker adds buckets ahead of
-- time and drops the oldest once their rows are due (src/db/buckets/, src/streams/retention.rs). Rows of
-- lane 2 are deleted row by row as before, and the partition is dropped once the newest of its streams is
-- past retention.
-- Waits at most this long behind a reader of chunks (everyone queues behind the wait): a start that cannot
-- have the lock fails and is retried.
set local lock_timeout = '5s';
alter table chunks rename to chunks_before;
alter index chunks_pkey rename to chunks_before_pkey;
alter index chunks_stream_position_idx rename to chunks_before_stream_position_idx;
alter index chunks_tx_idx rename to chunks_before_tx_idx;
alter index chunks_stream_events_idx rename to chunks_before_stream_events_idx;

create table chunks (
    sequence_number bigint not null default nextval('chunks_sequence_number_seq'),
    stream_id text not null,
    chunk json not null,
    is_done boolean not null default false,
    created_at timestamptz not null default now(),
    position bigint not null,
    tx xid8 not null default pg_current_xact_id(),
    bytes integer not null,
    event_type text,
    lane smallint not null default 0,
    constraint chunks_event_type_check check (event_type in (
        'text_delta', 'tool_call_start', 'tool_call_result', 'question_raised', 'question_answered',
        'question_cancelled', 'question_expired', 'question_declined', 'phase_change', 'completed_query',
        'stream_aborted'))
) partition by list (lane);
alter sequence chunks_sequence_number_seq owned by chunks.sequence_number;
alter table chunks_before alter column sequence_number drop default;

-- Lane 0: buckets of `created_at`. Its indexes are partitioned ones, so every bucket attached gets them. A
-- stream's positions are unique through its counter row (`streams.last_position`), not an index: a unique
-- index of a partitioned table must hold the partition key.
create table chunks_live partition of chunks for values in (0) partition by range (created_at);
-- Every bucket carries this check (copied with the parent's constraints): with its check of its upper
-- bound, it implies the bucket's partition constraint, so attaching a bucket again needs no scan.
alter table chunks_live add constraint chunks_live_lane check (lane = 0);
create index chunks_live_stream_position_idx on chunks_live (stream_id, position);
create index chunks_live_tx_idx on chunks_live (tx, sequence_number);
create index chunks_live_sequence_idx on chunks_live (sequence_number);
create index chunks_live_stream_events_idx on chunks_live (stream_id, event_type, position)
    where event_type is not null;

-- Lane 1: rows of streams still open (or finished within the retention) when their bucket was dropped.
create table chunks_kept partition of chunks for values in (1);
create index chunks_kept_stream_position_idx on chunks_kept (stream_id, position);
create index chunks_kept_tx_idx on chunks_kept (tx, sequence_number);
create index chunks_kept_sequence_idx on chunks_kept (sequence_number);
create index chunks_kept_stream_events_idx on chunks_kept (stream_id, event_type, position)
    where event_type is not null;

-- Lane 2: the table of before, whole (its own indexes stay; no scan: its validated check implies the bound).
alter table chunks attach partition chunks_before for values in (2);

-- The buckets of each table partitioned by time: a bucket holds the rows whose key is below `upper_bound`
-- and not below the bucket before it's (the oldest: every key below its bound, so rows of any age are
-- accepted). `dropped_before` is the bound of the last bucket dropped: every row with a key below it is gone
-- (or was carried to another lane). The broker writes both in the transactions that change the partitions.
create table partition_buckets (
    parent text not null,
    partition text primary key,
    upper_bound timestamptz not null,
    unique (parent, upper_bound)
);
create table partition_horizons (
    parent text primary key,
    dropped_before timestamptz,
    -- when the table of before became a partition (lane 2): its rows are all older
    before_since timestamptz,
    -- the past down to which buckets were made at the first start (their width is the broker's setting,
    -- which this migration does not know): rows restored or imported with a past key spread over them
    past_from timestamptz
);

-- The first bucket: every key up to six hours ahead, so every replica, of this version or the previous one,
-- has a bucket to write to, also through a rollout that stops half way. Before it serves, the broker lays it
-- out at its own bucket width, with buckets for the past (src/db/buckets/layout.rs), and adds the next ones.
do $$
declare
    upper timestamptz := date_trunc('hour', now()) + interval '6 hours';
    name text := 'chunks_until_' || to_char(upper at time zone 'UTC', 'YYYYMMDD"t"HH24MISS');
begin
    execute format('create table %I (like chunks_live including defaults including constraints)', name);
    execute format('alter table %I add constraint %I check (created_at < %L)', name, name || '_bound', upper);
    execute format('alter table chunks_live attach partition %I for values from (minvalue) to (%L)', name, upper);
    insert into partition_buckets (parent, partition, upper_bound) values ('chunks_live', name, upper);
end
$$;
insert into partition_horizons (parent, before_since) values ('chunks_live', now());

-- The views over chunks name the table they were made with: made again, they read the partitioned one.
create or replace view stream_phases as
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
create or replace view query_resume_states as
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
