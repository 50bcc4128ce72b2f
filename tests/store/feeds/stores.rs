//! The feed stores under the contract: each makes its store and writes to it through the store's own
//! write path, as the replica's routes do.

use ark_broker::{
    db::{feed::Feed, follow::Page, pool::Pool},
    events::{EventStore, model::EventRecord, model::NewEvent},
    idempotency::KeyState,
    messages::{MessageStore, model::MessageItem},
    sessions::{SessionStore, event::SessionEvent},
    streams::{
        ChunkStore,
        model::{ChunkRow, Line},
        store::Append,
    },
    traces::{SpanStore, model::NewSpan, model::SpanRecord},
};
use serde_json::json;

use super::{FeedContract, Resume, budget::BudgetContract, keyed, watched};
use crate::TTLS;

fn padded(n: usize, padding: usize) -> serde_json::Value {
    json!({"n": n, "padding": "x".repeat(padding)})
}

/// Conversation memory: an append of two messages.
pub struct Messages;

impl FeedContract for Messages {
    const FEED: Feed = Feed::Messages;
    const KEYED: bool = true;
    const ROWS_PER_WRITE: usize = 2;
    type Store = MessageStore;

    fn store(pool: Pool) -> MessageStore {
        MessageStore::new(pool)
    }

    async fn write(store: &MessageStore, key: &str, padding: usize) {
        let messages = [padded(0, padding), padded(1, padding)];
        let stored = store.append(key, "q", &messages, None, TTLS, None).await.expect("stored");
        assert_eq!(stored, KeyState::New);
    }

    async fn key_page(store: &MessageStore, key: &str, after: i64) -> Option<Page<MessageItem, i64>> {
        keyed(store, key, after).await
    }

    async fn resume(store: &MessageStore, key: &str, sequence: i64) -> Option<Resume> {
        watched(store, key, sequence).await
    }
}

impl BudgetContract for Messages {
    const TABLE: &'static str = "messages";

    async fn delete_over_budget(store: &MessageStore, max_bytes: i64, limit: i64) -> u64 {
        store.delete_over_budget(max_bytes, limit).await.expect("deleted") as u64
    }
}

/// Chunk streams: a flush of two lines of one stream.
pub struct Chunks;

impl FeedContract for Chunks {
    const FEED: Feed = Feed::Chunks;
    const KEYED: bool = true;
    const ROWS_PER_WRITE: usize = 2;
    type Store = ChunkStore;

    fn store(pool: Pool) -> ChunkStore {
        ChunkStore::new(pool, 1)
    }

    async fn write(store: &ChunkStore, key: &str, padding: usize) {
        store.create_streams(&[key]).await.expect("the stream");
        let line = |n| Line { text: padded(n, padding).to_string(), event: None };
        let append = Append { stream_id: key.into(), chunks: vec![line(0), line(1)] };
        assert_eq!(store.append(&[&append]).await.expect("flushed"), [key], "the stream was free and written");
    }

    async fn key_page(store: &ChunkStore, key: &str, after: i64) -> Option<Page<ChunkRow, i64>> {
        keyed(store, key, after).await
    }
}

/// Execution events: one event of a query.
pub struct Events;

impl FeedContract for Events {
    const FEED: Feed = Feed::Events;
    const KEYED: bool = true;
    const ROWS_PER_WRITE: usize = 1;
    type Store = EventStore;

    fn store(pool: Pool) -> EventStore {
        EventStore::new(pool)
    }

    async fn write(store: &EventStore, key: &str, padding: usize) {
        let event = NewEvent {
            event: json!({"data": {"queryId": key}, "padding": "x".repeat(padding)}),
            query_id: key.to_owned(),
            query_name: None,
            query_namespace: None,
            session_id: None,
            reason: None,
            event_type: None,
            occurred_at: None,
            duration_ms: None,
            ttl_seconds: None,
        };
        store.append(&event, TTLS).await.expect("stored");
    }

    async fn key_page(store: &EventStore, key: &str, after: i64) -> Option<Page<EventRecord, i64>> {
        keyed(store, key, after).await
    }

    async fn resume(store: &EventStore, key: &str, sequence: i64) -> Option<Resume> {
        watched(store, key, sequence).await
    }
}

impl BudgetContract for Events {
    const TABLE: &'static str = "events";

    async fn delete_over_budget(store: &EventStore, max_bytes: i64, limit: i64) -> u64 {
        store.delete_over_budget(max_bytes, limit).await.expect("deleted") as u64
    }
}

/// Sessions: an event applied to one session (`POST /sessions`), which changes its one row.
pub struct Sessions;

impl FeedContract for Sessions {
    const FEED: Feed = Feed::Sessions;
    const KEYED: bool = false;
    const ROWS_PER_WRITE: usize = 1;
    type Store = SessionStore;

    fn store(pool: Pool) -> SessionStore {
        SessionStore::new(pool)
    }

    async fn write(store: &SessionStore, key: &str, _padding: usize) {
        let event = SessionEvent {
            session_id: key.to_owned(),
            query_name: "q".to_owned(),
            reason: "QueryExecutionStart".to_owned(),
            ..SessionEvent::default()
        };
        store.apply(&event, TTLS.session_seconds).await.expect("applied");
    }
}

/// Spans: an export of two spans of one trace.
pub struct Spans;

impl FeedContract for Spans {
    const FEED: Feed = Feed::Spans;
    const KEYED: bool = true;
    const ROWS_PER_WRITE: usize = 2;
    type Store = SpanStore;

    fn store(pool: Pool) -> SpanStore {
        SpanStore::new(pool)
    }

    async fn write(store: &SpanStore, key: &str, padding: usize) {
        let span = |n: usize| NewSpan {
            span: json!({"traceId": key, "spanId": n.to_string(), "padding": "x".repeat(padding)}),
            trace_id: key.to_owned(),
            span_id: Some(n.to_string()),
            parent_span_id: None,
            name: None,
            session_id: None,
            query_name: None,
            start_time: None,
            end_time: None,
        };
        store.append(&[span(0), span(1)], TTLS.event_seconds).await.expect("stored");
    }

    async fn key_page(store: &SpanStore, key: &str, after: i64) -> Option<Page<SpanRecord, i64>> {
        keyed(store, key, after).await
    }

    async fn resume(store: &SpanStore, key: &str, sequence: i64) -> Option<Resume> {
        watched(store, key, sequence).await
    }
}

impl BudgetContract for Spans {
    const TABLE: &'static str = "spans";

    async fn delete_over_budget(store: &SpanStore, max_bytes: i64, limit: i64) -> u64 {
        store.delete_over_budget(max_bytes, limit).await.expect("deleted") as u64
    }
}
