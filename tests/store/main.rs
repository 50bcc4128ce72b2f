//! The stores' contract against a real PostgreSQL, fast: no broker process, a database of its own per test
//! (`#[sqlx::test]`, dropped after a passing test), migrated by the broker's own migrator. It covers the
//! feed write path (one NOTIFY naming the transaction, whose rows the tails read back) and the claim loop
//! (concurrent writers of one key get every position once, in their own order), and every feed store's reads
//! (`feeds`: the horizon, order, heads and resume, one suite run over each store), and Durable Streams'
//! group commit (`durable_groups`).
//!
//! `#[sqlx::test]` takes its server from `DATABASE_URL`: `scripts/test` starts a throwaway PostgreSQL and runs
//! this tier with it; plain `cargo test` lists these tests as ignored, saying what they need.

mod buckets;
mod durable_groups;
mod feeds;
mod notices;
mod receipts;
mod sizes;

use std::{collections::BTreeMap, time::Duration};

use ark_broker::{
    config::Ttls,
    db::{
        feed::{self, CHANNEL, Feed, Notice},
        migrate_on,
        notice::KeyRange,
        tail::FeedSource,
        watch::{KeyPages, WatchSource},
    },
    idempotency::{IdempotencyKey, KeyState},
    messages::store::MessageStore,
    streams::{
        model::Line,
        store::{Append, ChunkStore},
    },
};
use serde_json::{Value, json};
use sqlx::{PgPool, postgres::PgListener};

const TTLS: Ttls = Ttls { message_seconds: 3600, event_seconds: 3600, session_seconds: 3600 };

async fn migrated(pool: &PgPool) -> MessageStore {
    migrate_on(pool.acquire().await.expect("a connection").detach()).await.expect("the migrations apply");
    MessageStore::new(pool.clone().into())
}

/// A pool of one connection to `pool`'s database, with `settings` as its session's settings, so every read
/// through it is flushed to PostgreSQL's counters by [`chunks_read_by_scans`].
async fn one_connection(pool: &PgPool, settings: &[(&str, &str)]) -> PgPool {
    let options = pool.connect_options().as_ref().clone().options(settings.iter().copied());
    sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await.expect("a connection")
}

/// Rows of `chunks` read by sequential scans so far, as PostgreSQL counts them, with the connection's own
/// reads flushed to the counters first (`pg_stat_force_next_flush` flushes as its statement ends).
async fn chunks_read_by_scans(pool: &PgPool) -> i64 {
    sqlx::query("select pg_stat_force_next_flush()").execute(pool).await.expect("a flush of the counters");
    sqlx::query_scalar(
        "select coalesce(sum(seq_tup_read), 0)::bigint from pg_stat_user_tables
         where relid in (select relid from pg_partition_tree('chunks'))",
    )
    .fetch_one(pool)
    .await
    .expect("the counters")
}

/// Waits until some session of `pool`'s database waits for a lock (a settlement's insert behind a writer's,
/// a feed write held before its commit).
pub(crate) async fn wait_for_lock_waiter(pool: &PgPool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_locks l join pg_stat_activity a on a.pid = l.pid
                 where not l.granted and a.datname = current_database()",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a session waiting for a lock");
}

fn range(key: &str, after: i64, last: i64) -> KeyRange {
    KeyRange { key: key.to_owned(), after, last }
}

/// Every row of `conversation`, by position.
async fn conversation(store: &MessageStore, conversation: &str) -> Vec<(i64, Value)> {
    let (mut rows, mut after) = (Vec::new(), 0);
    loop {
        let page = store.key_page(conversation, after).await.expect("a page");
        rows.extend(page.rows.iter().map(|row| (row.position, row.message.clone())));
        after = page.next;
        if page.caught_up {
            return rows;
        }
    }
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn concurrent_writers_of_one_conversation_get_every_position_once_in_their_own_order(pool: PgPool) {
    let store = migrated(&pool).await;
    let writers: Vec<_> = (0..40)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                let batch = [json!({"writer": writer, "n": 0}), json!({"writer": writer, "n": 1})];
                store.append("c", "q", &batch, None, TTLS, None).await
            })
        })
        .collect();
    for writer in writers {
        assert!(matches!(writer.await.expect("the writer ran"), Ok(KeyState::New)), "every writer's append is stored");
    }
    let rows = conversation(&store, "c").await;
    let positions: Vec<i64> = rows.iter().map(|(position, _)| *position).collect();
    assert_eq!(positions, (1..=80).collect::<Vec<_>>(), "positions 1..=80, each once, none skipped");
    // Each writer's two messages are adjacent and in its order: a batch claims its positions at once.
    let mut by_writer: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for (position, message) in &rows {
        by_writer
            .entry(message["writer"].as_i64().unwrap())
            .or_default()
            .push((*position, message["n"].as_i64().unwrap()));
    }
    assert_eq!(by_writer.len(), 40);
    for (writer, stored) in by_writer {
        assert_eq!(stored.len(), 2, "writer {writer}'s two messages, once each");
        assert_eq!((stored[0].1, stored[1].1), (0, 1), "writer {writer}'s messages in its order");
        assert_eq!(stored[1].0, stored[0].0 + 1, "writer {writer}'s messages adjacent");
    }
    assert_eq!(store.last_position("c").await.expect("the position"), 80);
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_write_notifies_once_naming_its_transaction_whose_rows_read_back_exactly(pool: PgPool) {
    let store = migrated(&pool).await;
    let mut listener = PgListener::connect_with(&pool).await.expect("a LISTEN connection");
    listener.listen(CHANNEL).await.expect("LISTEN");
    let batch = [json!({"role": "user", "content": "hi"}), json!({"role": "assistant", "content": "yo"})];
    store.append("c", "q", &batch, None, TTLS, None).await.expect("stored");
    let notification = listener.recv().await.expect("a notification");
    let Notice { feed, tx, keys } = feed::parse_notice(notification.payload()).expect("a feed's payload");
    assert_eq!(feed, Feed::Messages);
    assert_eq!(keys, Some(vec![range("c", 0, 2)]), "it names the conversation and its new positions");
    let rows = store.rows_of(&[tx]).await.expect("the transaction's rows");
    let messages: Vec<&Value> = rows.iter().map(|row| &row.message).collect();
    assert_eq!(messages, batch.iter().collect::<Vec<_>>(), "exactly the transaction's rows, in order");
    assert!(rows.iter().all(|row| row.tx == tx && row.conversation_id == "c"));
    // Nothing else was said: one write, one notification.
    store.append("other", "q", &[json!({"n": 1})], None, TTLS, None).await.expect("stored");
    let next = listener.recv().await.expect("the next notification");
    let next = feed::parse_notice(next.payload()).expect("a feed's payload");
    assert_ne!(next.tx, tx, "the first write notified once");
    assert_eq!(next.keys, Some(vec![range("other", 0, 1)]));
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_repeated_idempotency_key_appends_nothing_and_says_so(pool: PgPool) {
    let store = migrated(&pool).await;
    let key = IdempotencyKey::parse(b"retry-1").expect("a valid key");
    let batch = [json!({"n": 1})];
    let first = store.append("c", "q", &batch, None, TTLS, Some((&key, "fingerprint"))).await.expect("stored");
    assert_eq!(first, KeyState::New);
    let again = store.append("c", "q", &batch, None, TTLS, Some((&key, "fingerprint"))).await.expect("answered");
    assert_ne!(again, KeyState::New, "the retry is recognised");
    assert_eq!(conversation(&store, "c").await.len(), 1, "and appends nothing (its transaction rolled back)");
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_chunk_flush_notifies_once_after_its_commit_naming_its_transaction(pool: PgPool) {
    migrated(&pool).await;
    let store = ChunkStore::new(pool.clone().into(), 1);
    let mut listener = PgListener::connect_with(&pool).await.expect("a LISTEN connection");
    listener.listen(CHANNEL).await.expect("LISTEN");
    store.create_streams(&["s1", "s2"]).await.expect("the streams");
    let line = |text: &str| Line { text: text.to_owned(), event: None };
    let first = Append { stream_id: "s1".into(), chunks: vec![line(r#"{"n":1}"#), line(r#"{"n":2}"#)] };
    let second = Append { stream_id: "s2".into(), chunks: vec![line(r#"{"n":3}"#)] };
    let mut written = store.append(&[&first, &second]).await.expect("flushed");
    written.sort();
    assert_eq!(written, ["s1", "s2"], "both streams were free and written");
    let notification = listener.recv().await.expect("a notification");
    let Notice { feed, tx, keys } = feed::parse_notice(notification.payload()).expect("a feed's payload");
    assert_eq!(feed, Feed::Chunks);
    let mut keys = keys.expect("a flush names its streams");
    keys.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(keys, [range("s1", 0, 2), range("s2", 0, 1)], "each stream with its new positions");
    let named = store.rows_in(&keys).await.expect("the named rows");
    let rows = store.rows_of(&[tx]).await.expect("the transaction's rows");
    let stored: Vec<(&str, i64, &str)> =
        rows.iter().map(|r| (r.stream_id.as_str(), r.position, r.chunk.as_str())).collect();
    assert_eq!(stored, [("s1", 1, r#"{"n":1}"#), ("s1", 2, r#"{"n":2}"#), ("s2", 1, r#"{"n":3}"#)]);
    let by_range: Vec<(&str, i64)> = named.iter().map(|r| (r.stream_id.as_str(), r.position)).collect();
    assert_eq!(by_range, [("s1", 1), ("s1", 2), ("s2", 1)], "the named positions read back the same rows");
    // One flush, one notification: the next one names the next flush's transaction.
    store.append(&[&second]).await.expect("flushed again");
    let next = listener.recv().await.expect("the next notification");
    let next = feed::parse_notice(next.payload()).expect("a feed's payload");
    assert!(next.tx > tx, "the first flush notified once");
    assert_eq!(next.keys, Some(vec![range("s2", 1, 2)]));
    // A flush that writes nothing (an empty batch) says nothing.
    assert!(store.append(&[]).await.expect("nothing to flush").is_empty());
}
