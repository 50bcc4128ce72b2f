-- A receipt names its transaction (issue 35): the chunk flush commits by itself, in one statement, so when
-- its answer is lost and the receipt says it committed, the streams it wrote are read back by this id.
-- Within one server's history a transaction id is never handed out twice, and a receipt found on a
-- promoted standby came from the old primary's WAL with its id. Expand-only: older replicas insert
-- receipts without it and the default fills it in.
alter table commit_receipts add column tx xid8 not null default pg_current_xact_id();
