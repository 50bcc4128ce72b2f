//! The raw baseline of the record phases: the statements a minimal service would run for the same work,
//! on tables of the broker's shapes in a database of their own, and the copies of the broker's records
//! they run against.

use serde_json::Value;
use sqlx::{Executor, PgPool};

use super::{REASONS, team_event};

/// The raw baseline's tables: the broker's shapes, without its code.
pub const SCHEMA: &str = "
create table events (sequence_number bigserial primary key, query_id text not null, session_id text,
    reason text, event jsonb not null, created_at timestamptz not null default now());
create index events_query_idx on events (query_id, sequence_number);
create table sessions (session_id text primary key, sequence bigserial, name text not null, status text not null,
    last_activity timestamptz not null, expires_at timestamptz not null);
create index sessions_activity_idx on sessions (last_activity desc, sequence);
create table session_queries (session_id text not null, query_name text not null, agent text, phase text not null,
    last_activity timestamptz not null, primary key (session_id, query_name));
create table messages (sequence_number bigserial primary key, conversation_id text not null, position bigint not null,
    message jsonb not null, created_at timestamptz not null default now());
create unique index messages_conversation_idx on messages (conversation_id, position);";

/// One event stored and applied to its session, as a minimal service would.
pub async fn event(pool: &PgPool, query: usize, iteration: u64) -> Result<(), String> {
    let event = team_event(query, iteration);
    let name = format!("team-q-{query}");
    let phase = if iteration as usize % REASONS.len() == REASONS.len() - 1 { "done" } else { "running" };
    let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
    sqlx::query("insert into events (query_id, session_id, reason, event) values ($1, 'session-bench-team', $2, $3)")
        .bind(&name)
        .bind(event["reason"].as_str())
        .bind(&event)
        .execute(&mut *tx)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query(
        "insert into sessions (session_id, name, status, last_activity, expires_at)
         values ('session-bench-team', 'bench-team', 'active', now(), now() + interval '30 days')
         on conflict (session_id) do update set last_activity = now(), status = 'active'",
    )
    .execute(&mut *tx)
    .await
    .map_err(|e| e.to_string())?;
    sqlx::query(
        "insert into session_queries (session_id, query_name, agent, phase, last_activity)
         values ('session-bench-team', $1, 'agent', $2, now())
         on conflict (session_id, query_name) do update set phase = excluded.phase, last_activity = now()",
    )
    .bind(&name)
    .bind(phase)
    .execute(&mut *tx)
    .await
    .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())
}

/// The broker's sessions, copied into the raw baseline's tables (same rows, same sizes).
pub async fn copy_sessions(broker_db: &PgPool, raw: &PgPool) {
    let sessions: Vec<(String, String, String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("select session_id, name, status, last_activity from sessions")
            .fetch_all(broker_db)
            .await
            .expect("the brokers' sessions");
    let queries: Vec<(String, String, Option<String>, String)> =
        sqlx::query_as("select session_id, query_name, agent, phase from session_queries")
            .fetch_all(broker_db)
            .await
            .expect("the brokers' session queries");
    for part in sessions.chunks(10_000) {
        let ids: Vec<&str> = part.iter().map(|s| s.0.as_str()).collect();
        let names: Vec<&str> = part.iter().map(|s| s.1.as_str()).collect();
        let statuses: Vec<&str> = part.iter().map(|s| s.2.as_str()).collect();
        let activity: Vec<_> = part.iter().map(|s| s.3).collect();
        sqlx::query(
            "insert into sessions (session_id, name, status, last_activity, expires_at)
             select i, n, s, a, a + interval '30 days' from unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
             as t(i, n, s, a) on conflict do nothing",
        )
        .bind(ids)
        .bind(names)
        .bind(statuses)
        .bind(activity)
        .execute(raw)
        .await
        .expect("copy sessions");
    }
    for part in queries.chunks(10_000) {
        let ids: Vec<&str> = part.iter().map(|q| q.0.as_str()).collect();
        let names: Vec<&str> = part.iter().map(|q| q.1.as_str()).collect();
        let agents: Vec<Option<&str>> = part.iter().map(|q| q.2.as_deref()).collect();
        let phases: Vec<&str> = part.iter().map(|q| q.3.as_str()).collect();
        sqlx::query(
            "insert into session_queries (session_id, query_name, agent, phase, last_activity)
             select i, n, a, p, now() from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as t(i, n, a, p)
             on conflict do nothing",
        )
        .bind(ids)
        .bind(names)
        .bind(agents)
        .bind(phases)
        .execute(raw)
        .await
        .expect("copy session queries");
    }
    raw.execute("analyze sessions; analyze session_queries").await.expect("analyze");
}

/// A page of sessions with their queries, plus the total and status counts.
pub async fn sessions_page(pool: &PgPool, offset: i64) -> Result<u64, String> {
    let page: Vec<(Value,)> = sqlx::query_as(
        "select jsonb_build_object('id', s.session_id, 'name', s.name, 'status', s.status,
                'lastActivity', s.last_activity,
                'queries', (select coalesce(jsonb_agg(jsonb_build_object('name', q.query_name, 'agent', q.agent,
                                                                         'phase', q.phase)), '[]')
                            from session_queries q where q.session_id = s.session_id))
         from (select * from sessions where expires_at > now() order by last_activity desc, sequence
               limit 50 offset $1) s
         order by s.last_activity desc, s.sequence",
    )
    .bind(offset)
    .fetch_all(pool)
    .await
    .map_err(|e| e.to_string())?;
    sqlx::query("select count(*), count(*) filter (where status = 'active') from sessions where expires_at > now()")
        .execute(pool)
        .await
        .map_err(|e| e.to_string())?;
    Ok(page.len() as u64)
}

/// Every session with its queries.
pub async fn all_sessions(pool: &PgPool) -> Result<u64, String> {
    let rows: Vec<(Value,)> = sqlx::query_as(
        "select jsonb_build_object('id', s.session_id, 'name', s.name, 'status', s.status,
                'lastActivity', s.last_activity, 'queries', coalesce(q.queries, '[]'))
         from sessions s left join (select session_id, jsonb_agg(jsonb_build_object('name', query_name,
                'agent', agent, 'phase', phase)) as queries from session_queries group by session_id) q
           on q.session_id = s.session_id
         where s.expires_at > now()",
    )
    .fetch_all(pool)
    .await
    .map_err(|e| e.to_string())?;
    Ok(rows.len() as u64)
}

/// The broker's messages, copied into the raw baseline's table.
pub async fn copy_messages(broker_db: &PgPool, raw: &PgPool) {
    raw.execute("alter table messages set unlogged").await.expect("unlogged while copying");
    let mut after = 0_i64;
    loop {
        let part: Vec<(i64, String, i64, Value)> = sqlx::query_as(
            "select sequence_number, conversation_id, position, message from messages
             where sequence_number > $1 order by sequence_number limit 50000",
        )
        .bind(after)
        .fetch_all(broker_db)
        .await
        .expect("the brokers' messages");
        let Some(last) = part.last() else { break };
        after = last.0;
        let sequences: Vec<i64> = part.iter().map(|m| m.0).collect();
        let conversations: Vec<&str> = part.iter().map(|m| m.1.as_str()).collect();
        let positions: Vec<i64> = part.iter().map(|m| m.2).collect();
        let messages: Vec<&Value> = part.iter().map(|m| &m.3).collect();
        sqlx::query(
            "insert into messages (sequence_number, conversation_id, position, message)
             select * from unnest($1::bigint[], $2::text[], $3::bigint[], $4::jsonb[])",
        )
        .bind(sequences)
        .bind(conversations)
        .bind(positions)
        .bind(messages)
        .execute(raw)
        .await
        .expect("copy messages");
    }
    raw.execute("alter table messages set logged; analyze messages").await.expect("logged again");
}

/// A conversation's first 100 messages.
pub async fn messages_page(pool: &PgPool, conversation: &str) -> Result<u64, String> {
    let rows: Vec<(i64, Value)> = sqlx::query_as(
        "select sequence_number, message from messages where conversation_id = $1 order by position limit 100",
    )
    .bind(conversation)
    .fetch_all(pool)
    .await
    .map_err(|e| e.to_string())?;
    Ok(rows.len() as u64)
}

/// The 100 messages after `cursor`.
pub async fn resume(pool: &PgPool, cursor: i64) -> Result<u64, String> {
    let rows: Vec<(i64, String, Value)> = sqlx::query_as(
        "select sequence_number, conversation_id, message from messages where sequence_number > $1
         order by sequence_number limit 100",
    )
    .bind(cursor)
    .fetch_all(pool)
    .await
    .map_err(|e| e.to_string())?;
    Ok(rows.len() as u64)
}
