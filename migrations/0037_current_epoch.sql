-- The first transaction of the newest primary epoch (`primary_epochs`, migration 0028), which every global
-- page and a live watcher's start snapshot report: a reader whose cursor is of an older epoch rebases it
-- there (src/db/follow.rs), since the new primary may hand out transaction ids below those it passed.
-- One definition for every feed's query. Expand-only.
create function ark_broker_current_epoch() returns bigint language sql stable as $$
    select first_tx::text::bigint from primary_epochs order by timeline desc limit 1
$$;
