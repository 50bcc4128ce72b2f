-- The byte budgets (MESSAGE_MAX_BYTES, EVENT_MAX_BYTES, TRACE_MAX_BYTES) know each table's bytes without
-- summing it: every statement that inserts, updates or deletes rows of messages, events or spans appends the
-- change to `byte_totals` (statement triggers over the rows it changed, so plain SQL — a restore, an import,
-- a DBA's delete — is counted like the broker's own writes). A budget pass adds the table's changes up, keeps
-- their sum as one row, and deletes from the oldest rows only as many as the budget is over (docs/retention.md).
-- The triggers take a SHARE ROW EXCLUSIVE lock for the rest of this migration: writers of these three tables
-- wait while the current totals are summed (readers do not); at most this long behind one of them.
set local lock_timeout = '5s';

create table byte_totals (
    feed text not null,
    bytes bigint not null
);
create index byte_totals_feed_idx on byte_totals (feed);

-- `tg_argv[0]` names the table's budget. Each trigger names only its own transition tables; the branches of
-- the others are never run for it.
create function count_bytes() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into byte_totals (feed, bytes) select tg_argv[0], sum(bytes) from new_rows having count(*) > 0;
    elsif tg_op = 'DELETE' then
        insert into byte_totals (feed, bytes) select tg_argv[0], -sum(bytes) from old_rows having count(*) > 0;
    elsif tg_op = 'UPDATE' then
        insert into byte_totals (feed, bytes)
        select tg_argv[0], n.bytes - o.bytes
        from (select coalesce(sum(bytes), 0) as bytes from new_rows) n,
             (select coalesce(sum(bytes), 0) as bytes from old_rows) o
        where n.bytes <> o.bytes;
    elsif tg_op = 'TRUNCATE' then
        delete from byte_totals where feed = tg_argv[0];
    end if;
    return null;
end $$;

create trigger messages_bytes_inserted after insert on messages referencing new table as new_rows
    for each statement execute function count_bytes('messages');
create trigger messages_bytes_updated after update on messages referencing old table as old_rows new table as new_rows
    for each statement execute function count_bytes('messages');
create trigger messages_bytes_deleted after delete on messages referencing old table as old_rows
    for each statement execute function count_bytes('messages');
create trigger messages_bytes_truncated after truncate on messages
    for each statement execute function count_bytes('messages');

create trigger events_bytes_inserted after insert on events referencing new table as new_rows
    for each statement execute function count_bytes('events');
create trigger events_bytes_updated after update on events referencing old table as old_rows new table as new_rows
    for each statement execute function count_bytes('events');
create trigger events_bytes_deleted after delete on events referencing old table as old_rows
    for each statement execute function count_bytes('events');
create trigger events_bytes_truncated after truncate on events
    for each statement execute function count_bytes('events');

create trigger spans_bytes_inserted after insert on spans referencing new table as new_rows
    for each statement execute function count_bytes('spans');
create trigger spans_bytes_updated after update on spans referencing old table as old_rows new table as new_rows
    for each statement execute function count_bytes('spans');
create trigger spans_bytes_deleted after delete on spans referencing old table as old_rows
    for each statement execute function count_bytes('spans');
create trigger spans_bytes_truncated after truncate on spans
    for each statement execute function count_bytes('spans');

-- What the tables hold now (under the triggers' locks, so no write falls between the sum and the triggers).
insert into byte_totals (feed, bytes)
select 'messages', coalesce(sum(bytes), 0) from messages
union all select 'events', coalesce(sum(bytes), 0) from events
union all select 'spans', coalesce(sum(bytes), 0) from spans;
