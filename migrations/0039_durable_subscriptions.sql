-- Durable Streams' reserved subscription APIs (/v1/stream/__ds/…, src/durable/subs/): webhook and pull-wake
-- subscriptions, the streams each is linked to and how far it acknowledged them, and the keys that sign its
-- webhooks and tokens, shared by every replica. Expand-only: new tables.

create table ds_subscriptions (
    id text primary key,
    kind text not null check (kind in ('webhook', 'pull-wake')),
    pattern text,
    -- `pattern` as an anchored POSIX regex (a glob's `*` one path segment, `**` any), matched with `~`.
    pattern_regex text,
    webhook_url text,
    wake_stream text,
    lease_ttl_ms bigint not null check (lease_ttl_ms > 0),
    description text,
    -- What a repeated PUT is compared by.
    config_hash text not null,
    -- `{scheme}://{host}/v1/stream/` as the creator addressed the broker: its callback and JWKS URLs.
    base_url text not null,
    created_at timestamptz not null default now(),
    -- The current wake: its number (tokens carry it), its id, and where it stands: `idle` (nothing asked),
    -- `due` (a webhook to deliver, or a pull-wake to claim), `delivered` (a webhook answered, its lease
    -- running until its callback), `claimed` (a pull-wake worker holds the lease).
    generation bigint not null default 0,
    wake_id text,
    wake_state text not null default 'idle' check (wake_state in ('idle', 'due', 'delivered', 'claimed')),
    holder text,
    lease_until timestamptz,
    -- The tails a webhook reported ({path: position}), which its `{"done": true}` acknowledges.
    snapshot jsonb,
    deliver_after timestamptz,
    attempts integer not null default 0,
    -- The last delivery failed; retried with backoff.
    failing boolean not null default false
);

create index ds_subscriptions_due on ds_subscriptions (deliver_after) where wake_state in ('due', 'delivered');

create table ds_subscription_links (
    subscription_id text not null references ds_subscriptions (id) on delete cascade,
    path text not null,
    link_type text not null check (link_type in ('glob', 'explicit')),
    -- The position acknowledged: -1 before the stream's first (the protocol's offset `-1`).
    acked_position bigint not null check (acked_position >= -1),
    primary key (subscription_id, path)
);

create index ds_subscription_links_path on ds_subscription_links (path);

-- One key pair for every replica: made by the first replica that needs it.
create table ds_signing_keys (
    singleton boolean primary key default true check (singleton),
    -- The Ed25519 seed webhooks are signed with, and the HMAC-SHA256 key of callback and claim tokens.
    ed25519_seed bytea not null check (length(ed25519_seed) = 32),
    hmac_key bytea not null check (length(hmac_key) = 32),
    created_at timestamptz not null default now()
);
