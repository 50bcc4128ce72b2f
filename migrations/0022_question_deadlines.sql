-- Deadlines (issue 26): what a question's timeout does, and to whom it escalates. Expand-only.
alter table questions
    -- at its timeout: expire it (as before), answer it with its form's defaults, or escalate it once
    add column on_timeout text not null default 'expire' check (on_timeout in ('expire', 'default', 'escalate')),
    -- {"recipients": [ark://…], "channels": [slack:…, github:…]}: notified when it escalates
    add column escalate_to jsonb,
    -- when it escalated (its timeout then starts again, as long as the first)
    add column escalated_at timestamptz;
