-- The primaries this database has had (issue 34): a promoted standby starts a new timeline, and with
-- asynchronous replication it may lack the last commits of the old primary, whose sequence numbers it then
-- hands out again. Readers resume by sequence number (`cursor`, `resourceVersion`), so every broker
-- connection calls `ark_broker_enter_epoch()` before anything else: the first on a new timeline records it
-- and moves every sequence of the schema far past anything the old primary can have handed out, in one
-- transaction that the others wait for. The first timeline ever recorded moves nothing. Expand-only.
create table primary_epochs (
    timeline integer primary key,
    -- the transaction that recorded it: every broker write on this timeline has a higher id
    first_tx xid8 not null,
    began_at timestamptz not null default now()
);

create function ark_broker_enter_epoch() returns integer language plpgsql as $$
declare
    current_timeline integer := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer;
    earlier boolean;
    sequence_oid oid;
begin
    if exists (select 1 from primary_epochs where timeline = current_timeline) then
        return current_timeline;
    end if;
    earlier := exists (select 1 from primary_epochs);
    insert into primary_epochs (timeline, first_tx) values (current_timeline, pg_current_xact_id())
        on conflict (timeline) do nothing;
    if found and earlier then
        for sequence_oid in
            select c.oid from pg_class c where c.relkind = 'S' and c.relnamespace = current_schema()::regnamespace
        loop
            perform setval(sequence_oid, nextval(sequence_oid) + 1000000000);
        end loop;
    end if;
    return current_timeline;
end $$;
