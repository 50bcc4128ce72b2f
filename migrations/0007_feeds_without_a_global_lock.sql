-- Feeds without a cluster-wide lock (see src/db/feed.rs for the whole argument).
--
-- Per-key order: a stream's chunks and a conversation's messages get a position from a counter row
-- (`streams.last_position`, `conversations.last_position`) updated in the writing transaction. The row lock is
-- held to commit, so only writers of the same key serialise, and one key's positions commit in order.
-- `last_tx` is the transaction id of the key's last writer: a writer whose id is not above it must not write
-- that key (it retries in a new transaction), so one key's writers also get increasing transaction ids.
--
-- Global order: every row carries the id of the transaction that wrote it (`tx`, xid8). A global reader
-- delivers rows in (tx, sequence_number) order and only below the visibility horizon
-- `pg_snapshot_xmin(pg_current_snapshot())`, so no transaction still in flight can add a row before its
-- cursor. Because one key's writers have increasing ids, that order keeps every key's order too.

-- Chunks.
alter table streams
    add column last_position bigint not null default 0,
    add column last_tx xid8 not null default '0',
    -- DELETE /stream forgets streams without resetting their counters (a live reader's position must never be
    -- reused): a stream is known again once it is written past this position.
    add column purged_position bigint not null default 0;

alter table chunks
    add column position bigint,
    add column tx xid8 not null default pg_current_xact_id(),
    -- the chunk's size in bytes, so catch-up reads can be bounded by bytes without reading the chunks
    add column bytes integer;

update chunks c set position = numbered.position, bytes = octet_length(c.chunk::text)
from (select sequence_number,
             row_number() over (partition by stream_id order by sequence_number) as position
      from chunks) as numbered
where numbered.sequence_number = c.sequence_number;

update streams s set last_position = coalesce((select max(position) from chunks c where c.stream_id = s.stream_id), 0);

alter table chunks alter column position set not null, alter column bytes set not null;
drop index chunks_stream_idx;
create unique index chunks_stream_position_idx on chunks (stream_id, position);
create index chunks_tx_idx on chunks (tx, sequence_number);

-- Messages.
create table conversations (
    conversation_id text primary key,
    last_position bigint not null default 0,
    last_tx xid8 not null default '0'
);

alter table messages
    add column position bigint,
    add column tx xid8 not null default pg_current_xact_id(),
    add column bytes integer;

update messages m set position = numbered.position, bytes = octet_length(m.message::text)
from (select sequence_number,
             row_number() over (partition by conversation_id order by sequence_number) as position
      from messages) as numbered
where numbered.sequence_number = m.sequence_number;

insert into conversations (conversation_id, last_position)
select conversation_id, max(position) from messages group by conversation_id;

alter table messages alter column position set not null, alter column bytes set not null;
drop index messages_conversation_idx;
create unique index messages_conversation_position_idx on messages (conversation_id, position);
create index messages_tx_idx on messages (tx, sequence_number);

-- Questions keep one short feed lock (their changes are rare); their log rows name the writing transaction so
-- a notification can say which questions changed.
alter table question_events add column tx xid8 not null default pg_current_xact_id();
create index question_events_tx_idx on question_events (tx);
