-- Reminders (issue 26): a question may ask to be re-notified on its channels every so often until it closes.
-- Expand-only.
alter table questions
    -- seconds between reminders on each delivered channel; none when null
    add column remind_every_seconds integer check (remind_every_seconds between 1 and 31536000);

-- Each delivered message is reminded on its own schedule: remind_at is when its next reminder is due (from
-- its delivery on), and, like next_attempt_at for sends, it is pushed forward as the lease of the replica
-- that claimed the reminder. `reminders` counts those sent.
alter table channel_deliveries
    add column remind_at timestamptz,
    add column reminders integer not null default 0,
    add column remind_attempts integer not null default 0;

create index channel_deliveries_remind_due_idx on channel_deliveries (remind_at)
    where status = 'delivered' and remind_at is not null;
