-- Stable reporting views over questions; their names and columns are a contract documented in
-- docs/reporting.md. Change them only by adding columns.

create view report_pending_questions_by_recipient as
select recipient,
       count(*) as pending,
       min(created_at) as oldest_created_at,
       floor(extract(epoch from now() - min(created_at)))::bigint as oldest_age_seconds
from questions
where status = 'pending'
group by recipient;

create view report_question_answer_times_daily as
select (answered_at at time zone 'UTC')::date as day,
       count(*) as answered,
       percentile_cont(0.5) within group (order by extract(epoch from answered_at - created_at))::double precision
           as p50_seconds,
       percentile_cont(0.95) within group (order by extract(epoch from answered_at - created_at))::double precision
           as p95_seconds
from questions
where status = 'answered'
group by 1;

create view report_question_outcomes_by_sender as
select sender,
       count(*) filter (where status = 'answered') as answered,
       count(*) filter (where status = 'expired') as expired,
       count(*) filter (where status = 'cancelled') as cancelled,
       count(*) filter (where status = 'pending') as pending,
       count(*) as total
from questions
group by sender;

-- A question routed to several channels counts once per channel; one routed nowhere counts under '(none)'.
create view report_question_outcomes_by_channel as
select channel,
       count(*) filter (where status = 'answered') as answered,
       count(*) filter (where status = 'expired') as expired,
       count(*) filter (where status = 'cancelled') as cancelled,
       count(*) filter (where status = 'pending') as pending,
       count(*) as total
from questions
cross join lateral unnest(case when cardinality(channels) = 0 then array['(none)'] else channels end) as channel
group by channel;

-- A read-only role for BI tools: grant it to a login user, e.g.
--   create user metabase login password '…' in role ark_broker_reporting;
-- Roles belong to the whole server, so another database's migration may have created it already, and a
-- database owner without CREATEROLE (CloudNativePG's app user) cannot create it: the broker then starts
-- without it, and the role and its grants can be added later (docs/reporting.md). Amended after release; the
-- broker records this migration under its first checksum (src/db/migrate.rs).
do $$
begin
    if not exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        create role ark_broker_reporting nologin;
    end if;
exception
    when duplicate_object or unique_violation then null;
    when insufficient_privilege then
        raise notice 'ark_broker_reporting not created: this user cannot create roles (see docs/reporting.md)';
end
$$;

-- Only where the reporting role exists (see 0004; amended after release, recorded under its first checksum).
do $$
begin
    if exists (select from pg_roles where rolname = 'ark_broker_reporting') then
        grant usage on schema public to ark_broker_reporting;
        grant select on questions,
                       report_pending_questions_by_recipient,
                       report_question_answer_times_daily,
                       report_question_outcomes_by_sender,
                       report_question_outcomes_by_channel
            to ark_broker_reporting;
    end if;
end
$$;
