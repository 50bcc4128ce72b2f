-- Upstream's phase watermark: the arrival order (`events.sequence_number`) of the last event applied to a
-- session's query, and of the last terminal one (done, error, canceled). An event applied after a later
-- one arrived (two writers of one query name, each in its own transaction) must not undo it: an older
-- `done` applied late would clear a newer `error`. Only terminal events move the phase watermark, so a
-- late non-terminal event cannot make the query's own `done` look stale. 0: no event applied yet (or
-- only ones posted to `POST /sessions`, which have no arrival order).
alter table session_queries
    add column last_event_sequence bigint not null default 0,
    add column last_phase_event_sequence bigint not null default 0;
