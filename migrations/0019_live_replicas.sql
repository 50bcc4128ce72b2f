-- The replicas alive now, by their liveness key: each replica's LISTEN connection holds a session advisory
-- lock on its key while it is up (src/db/listener.rs), and PostgreSQL releases it when the connection closes.
-- One definition for the two readers: a new LISTEN connection ending its replica's stale session, and a
-- stream's end asking whether its open POSTs are on live replicas. Only this database's locks count.
create view live_replicas as
  select ((l.classid::bigint << 32) | l.objid::bigint) as replica_key, l.pid
  from pg_locks l
  where l.locktype = 'advisory' and l.granted and l.objsubid = 1
    and l.database = (select oid from pg_database where datname = current_database());
