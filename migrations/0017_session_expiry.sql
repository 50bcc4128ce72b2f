-- Sessions expire as upstream's Postgres sessions do (SESSIONS_VISIBILITY_TTL_SECONDS): every event and
-- message of a session moves `expires_at` forward; reads hide a session past it and the reaper deletes it
-- (its queries go with it, `on delete cascade`).
--
-- The default keeps replicas still running the previous version writing valid rows during a rolling upgrade
-- (they insert sessions without the column); the current version always sets it. Sessions from before
-- expiry existed get the default TTL from their last activity.
alter table sessions add column expires_at timestamptz not null default now() + interval '30 days';

update sessions set expires_at = last_activity + interval '30 days';

create index sessions_expires_idx on sessions (expires_at);

-- The view as before, with the expiry appended (a view may only gain columns at its end).
create or replace view session_entries as
select s.session_id, s.sequence, s.name, s.status, s.error_count, s.conversation_count, s.participants,
       s.conversations, s.created_at, s.last_activity, s.tx,
       coalesce((select jsonb_agg(jsonb_build_object(
                    'name', q.query_name, 'namespace', q.namespace, 'conversation_id', q.conversation_id,
                    'agent', q.agent, 'team', q.team, 'tool', q.tool, 'target_type', q.target_type,
                    'phase', q.phase, 'error', q.error, 'created_at', q.created_at,
                    'completed_at', q.completed_at, 'last_activity', q.last_activity) order by q.ordinal)
                 from session_queries q where q.session_id = s.session_id), '[]'::jsonb) as queries,
       s.expires_at
from sessions s;
