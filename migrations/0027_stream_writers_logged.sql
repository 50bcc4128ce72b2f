-- Open chunk POSTs outlive a change of PostgreSQL's primary now (issue 34: the broker rides a switchover
-- through), so their registrations must reach the standby too: an unlogged table is empty on a promoted
-- standby (and after a crash), and a `/complete` there would not wait for the POSTs' lines.
alter table stream_writers set logged;
