-- The chunk reads every wake, page and feed runs, as functions planned with sequential scans off
-- (docs/retention.md, "What it costs readers and writers"). A request connection plans each statement once
-- and keeps the plan; a bucket's statistics at that moment decide it. A bucket analysed while (nearly) empty
-- — a `VACUUM ANALYZE` of the whole database, or autovacuum's first look at a new bucket — is planned as a
-- sequential scan, and the plan stays while the bucket fills: every keyed read then scans all of its rows
-- (4.3 s for one wake in the benchmark). Every read here has an index that answers it, so refusing the
-- sequential scan costs nothing when the statistics are right and is what saves the read when they are not.
-- Functions, because PostgreSQL has no per-statement setting: a function's `set` holds while its
-- statements are planned and run, and PL/pgSQL keeps their plans for the connection as before. Creating
-- functions takes no lock on any table; replicas of the previous version go on with their own statements.

-- The rows of each stream `keys[i]` at positions in (`afters[i]`, `lasts[i]`], stream by stream, in position
-- order.
create function chunk_rows_in(keys text[], afters bigint[], lasts bigint[])
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query
        select c.* from unnest(keys, afters, lasts) with ordinality as r(k, after, last, ord)
        cross join lateral (
            select * from chunks where stream_id = r.k and position > r.after and position <= r.last
            order by position limit greatest(r.last - r.after, 0)
        ) c
        order by r.ord, c.position;
end $$;

-- The same from lane 0's buckets of the last five minutes alone (pruned as the statement starts): a wake's
-- positions were just committed.
create function chunk_recent_rows_in(keys text[], afters bigint[], lasts bigint[])
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query
        select c.* from unnest(keys, afters, lasts) with ordinality as r(k, after, last, ord)
        cross join lateral (
            select * from chunks
            where lane = 0 and created_at >= now() - interval '5 minutes'
              and stream_id = r.k and position > r.after and position <= r.last
            order by position limit greatest(r.last - r.after, 0)
        ) c
        order by r.ord, c.position;
end $$;

-- One stream's rows after `after`, at most `max_rows` and the first row that reaches `max_bytes`.
create function chunk_stream_page(key text, after bigint, max_rows bigint, max_bytes bigint)
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query
        -- The columns of `chunks`, in its order.
        select sequence_number, stream_id, chunk, is_done, created_at, position, tx, bytes, event_type, lane from (
            select *, sum(bytes) over (order by position) as running
            from chunks where stream_id = key and position > after order by position limit max_rows
        ) p
        where running - bytes < max_bytes
        order by position;
end $$;

-- The global feed after (`after_tx`, `after_sequence`), below `horizon`, within the same limits.
create function chunk_global_page(after_tx xid8, after_sequence bigint, horizon xid8, max_rows bigint,
                                  max_bytes bigint)
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query
        select sequence_number, stream_id, chunk, is_done, created_at, position, tx, bytes, event_type, lane from (
            select *, sum(bytes) over (order by tx, sequence_number) as running
            from chunks
            where (tx, sequence_number) > (after_tx, after_sequence) and tx < horizon
            order by tx, sequence_number limit max_rows
        ) p
        where running - bytes < max_bytes
        order by tx, sequence_number;
end $$;

-- The rows the transactions `txs` wrote, in commit order.
create function chunk_rows_of(txs xid8[])
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query select * from chunks where tx = any(txs) order by tx, sequence_number;
end $$;

-- Up to `max_rows` rows of the OpenAI-format feed after sequence `after` (the `GET /stream` page).
create function chunk_feed_after(after bigint, max_rows bigint)
returns setof chunks language plpgsql stable set enable_seqscan = off as $$
begin
    return query
        select * from chunks
        where sequence_number > after and (event_type is null or event_type = 'stream_aborted')
        order by sequence_number limit max_rows;
end $$;

-- Whether stream `key` has rows after `after` (only rows OpenAI-format readers see, if `openai_only`).
create function chunk_written_after(key text, after bigint, openai_only boolean)
returns boolean language plpgsql stable set enable_seqscan = off as $$
begin
    return exists (select 1 from chunks
                   where stream_id = key and position > after
                     and (not openai_only or event_type is null or event_type = 'stream_aborted'));
end $$;
