-- Commit receipts (issue 34): every write transaction inserts a row with a token of its own, so a COMMIT whose
-- answer was lost is settled by asking the server that answers now whether the row is there. Unlike
-- `pg_xact_status`, this stays true across a change of primary (a promoted standby hands out again the
-- transaction ids the old primary had in flight) and a crash restart. Asking inserts the token itself
-- (`fenced`): it waits for the transaction if that is still running there, and once the token is in, that
-- transaction can never commit. Tokens are UUIDv7, so the primary key is in time order and the reaper
-- deletes old receipts from its low end. Expand-only.
create table commit_receipts (
    token uuid primary key,
    -- true: inserted by a settlement that found no receipt, so the write it asked about did not commit
    fenced boolean not null default false
);
