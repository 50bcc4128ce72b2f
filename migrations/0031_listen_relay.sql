-- The LISTEN relay (src/db/relay.rs). PostgreSQL 15 wakes every listening backend of the database for every
-- notifying commit, whatever its channel; with many replicas one of them listens for the others and passes
-- each notification on, so a commit wakes one backend instead of one per replica. The replica that holds the
-- relay lock (a session advisory lock on its LISTEN connection) says here where it serves and which token a
-- replica presents to follow it. At most one row; a row whose replica is no longer live is stale.
create table listen_relay (
    only_row boolean primary key default true check (only_row),
    replica_key bigint not null,
    address text not null,
    token text not null,
    since timestamptz not null default now()
);
