-- Stable reporting views over events and sessions; their names and columns are a contract documented in
-- docs/reporting.md. Change them only by adding columns. Expired rows the reaper has not deleted yet are left
-- out, as the API leaves them out.

create view report_events_by_reason_daily as
select (created_at at time zone 'UTC')::date as day,
       reason,
       count(*) as events,
       count(*) filter (where event_type = 'Warning') as warnings
from events
where expires_at > now()
group by 1, 2;

-- The controller sends LLMCallComplete with data.durationMs (a string); the broker keeps it as a number.
create view report_llm_call_durations_daily as
select (created_at at time zone 'UTC')::date as day,
       count(*) as calls,
       percentile_cont(0.5) within group (order by duration_ms) as p50_ms,
       percentile_cont(0.95) within group (order by duration_ms) as p95_ms,
       max(duration_ms) as max_ms
from events
where reason = 'LLMCallComplete' and duration_ms is not null and expires_at > now()
group by 1;

create view report_error_sessions as
select s.session_id,
       s.name,
       s.status,
       s.error_count,
       s.last_activity,
       array(select q.query_name from session_queries q
             where q.session_id = s.session_id and q.phase = 'error' order by q.ordinal) as failed_queries,
       (select q.error from session_queries q
        where q.session_id = s.session_id and q.phase = 'error' order by q.last_activity desc limit 1) as last_error
from sessions s
where s.status = 'error' or s.error_count > 0;

-- Only where the reporting role exists (see 0004; amended after release, recorded under its first checksum).
do $$
begin
    if exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        grant select on events,
                       sessions,
                       session_queries,
                       spans,
                       report_events_by_reason_daily,
                       report_llm_call_durations_daily,
                       report_error_sessions
            to ark_broker_reporting;
    end if;
end
$$;
