//! The volume phase's prefill (benches/cluster/volume.rs): a day of streams, chunks, events and messages
//! written with plain SQL, as a restore or an import writes them, with the ages a day of traffic leaves.

use sqlx::{Executor, PgConnection};

/// Chunks per prefilled stream.
const PER_STREAM: i64 = 100;
/// Events and messages prefilled beside each stream: what a Query writes besides its chunks, about.
const EVENTS_PER_STREAM: i64 = 10;
const MESSAGES_PER_STREAM: i64 = 4;
/// Rows per prefill statement.
const BATCH: i64 = 500_000;
/// A 315-byte chunk, as the reference measurements' (`performance.md` §2).
const CHUNK: &str = r#"{"id": "chatcmpl-9x8Yz1AbCdEfGhIjKlMnOpQrStUv", "object": "chat.completion.chunk", "created": 1718000000, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_abc123def4", "choices": [{"index": 0, "delta": {"role": "assistant", "content": " the quick brown fox jumps"}, "logprobs": null, "finish_reason": null}]}"#;

/// The prefill, in statements of [`BATCH`] rows: streams `vol-<n>`, the even ones due.
pub async fn prefill(db: &mut PgConnection, rows: i64) {
    let streams = rows / PER_STREAM;
    sqlx::query(
        "insert into streams (stream_id, created_at, completed_at, last_position)
         select 'vol-' || g, now() - f - interval '5 minutes', now() - f, $2
         from generate_series(1, $1) g,
              lateral (select case when g % 2 = 0 then interval '2 hours' else interval '5 minutes' end) as a(f)",
    )
    .bind(streams)
    .bind(PER_STREAM)
    .execute(&mut *db)
    .await
    .expect("the prefill's streams");
    let per_batch = BATCH / PER_STREAM;
    let mut first = 1;
    while first <= streams {
        let last = (first + per_batch - 1).min(streams);
        sqlx::query(
            "insert into chunks (stream_id, position, chunk, bytes, created_at)
             select s.stream_id, p, $3::json, 315, s.created_at + p * interval '3 seconds'
             from generate_series($1::bigint, $2::bigint) g
             join streams s on s.stream_id = 'vol-' || g
             cross join generate_series(1, 100) p",
        )
        .bind(first)
        .bind(last)
        .bind(CHUNK)
        .execute(&mut *db)
        .await
        .expect("a prefill batch");
        prefill_records(db, first, last).await;
        first = last + 1;
    }
    for table in [
        "vacuum analyze chunks",
        "vacuum analyze streams",
        "vacuum analyze events",
        "vacuum analyze event_queries",
        "vacuum analyze messages",
        "vacuum analyze conversations",
    ] {
        db.execute(table).await.expect("vacuum analyze");
    }
}

/// The events and messages of streams `vol-<first>` to `vol-<last>`, as a restore writes them: each Query's
/// events (with its counter row) and its conversation's messages (with theirs), over the stream's 5 minutes,
/// expiring an hour after the stream finished.
async fn prefill_records(db: &mut PgConnection, first: i64, last: i64) {
    let statements = [
        "insert into event_queries (query_id, last_position)
         select 'vol-' || g, $3 from generate_series($1::bigint, $2::bigint) g",
        "insert into events (query_id, query_name, query_namespace, reason, event_type, occurred_at, event,
                             created_at, expires_at, position, bytes)
         select s.stream_id, s.stream_id, 'default', 'LLMCallComplete', 'Normal', at.t, e.body, at.t,
                s.completed_at + interval '1 hour', p, octet_length(e.body::text)
         from generate_series($1::bigint, $2::bigint) g
         join streams s on s.stream_id = 'vol-' || g
         cross join generate_series(1, $3) p
         cross join lateral (select s.created_at + p * interval '30 seconds') as at(t)
         cross join lateral (select jsonb_build_object(
             'reason', 'LLMCallComplete', 'type', 'Normal', 'timestamp', at.t, 'message', 'LLM call completed',
             'data', jsonb_build_object('queryId', s.stream_id, 'queryName', s.stream_id,
                                        'queryNamespace', 'default', 'durationMs', '1234',
                                        'model', 'gpt-4o-2024-08-06', 'agent', 'researcher'))) as e(body)",
        "insert into conversations (conversation_id, last_position)
         select 'vol-' || g, $4 from generate_series($1::bigint, $2::bigint) g",
        "insert into messages (conversation_id, query_id, message, created_at, expires_at, position, bytes)
         select s.stream_id, s.stream_id, m.body, s.created_at + p * interval '1 minute',
                s.completed_at + interval '1 hour', p, octet_length(m.body::text)
         from generate_series($1::bigint, $2::bigint) g
         join streams s on s.stream_id = 'vol-' || g
         cross join generate_series(1, $4) p
         cross join lateral (select jsonb_build_object(
             'role', case when p % 2 = 1 then 'user' else 'assistant' end,
             'content', 'a message of about two hundred bytes, as a short turn of a conversation with an agent: '
                        || repeat('the quick brown fox jumps over the lazy dog ', 3))) as m(body)",
    ];
    for sql in statements {
        sqlx::query(sql)
            .bind(first)
            .bind(last)
            .bind(EVENTS_PER_STREAM)
            .bind(MESSAGES_PER_STREAM)
            .execute(&mut *db)
            .await
            .unwrap_or_else(|error| panic!("a prefill of records: {error}\n{sql}"));
    }
}
