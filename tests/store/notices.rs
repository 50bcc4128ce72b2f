//! What a notification names against a real PostgreSQL: a flush whose streams do not fit in a payload names
//! none and is read whole, a write of several keys names each, and the named positions read back exactly
//! those rows — the contract that lets a replica read only what its own readers follow.

use ark_broker::{
    db::{
        feed::{self, CHANNEL, Feed, FeedTx},
        notice::MAX_PAYLOAD,
        tail::FeedSource,
    },
    streams::{
        model::Line,
        store::{Append, ChunkStore},
    },
};
use sqlx::{PgPool, postgres::PgListener};

use crate::{chunks_read_by_scans, migrated, one_connection, range};

async fn listening(pool: &PgPool) -> PgListener {
    let mut listener = PgListener::connect_with(pool).await.expect("a LISTEN connection");
    listener.listen(CHANNEL).await.expect("LISTEN");
    listener
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_flush_whose_streams_do_not_fit_names_none_and_is_read_whole(pool: PgPool) {
    migrated(&pool).await;
    let store = ChunkStore::new(pool.clone().into(), 1);
    let mut listener = listening(&pool).await;
    // 60 streams of 150-byte ids: about 10 KB of names, more than a payload holds.
    let ids: Vec<String> = (0..60).map(|i| format!("{i:03}-{}", "x".repeat(146))).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    store.create_streams(&id_refs).await.expect("the streams");
    let appends: Vec<Append> = ids
        .iter()
        .map(|id| Append { stream_id: id.as_str().into(), chunks: vec![Line { text: "{}".into(), event: None }] })
        .collect();
    let written = store.append(&appends.iter().collect::<Vec<_>>()).await.expect("flushed");
    assert_eq!(written.len(), 60);
    let notification = listener.recv().await.expect("a notification");
    assert!(notification.payload().len() <= MAX_PAYLOAD);
    let parsed = feed::parse_notice(notification.payload()).expect("a feed's payload");
    assert_eq!((parsed.feed, parsed.keys), (Feed::Chunks, None), "too many names: it names none");
    let rows = store.rows_of(&[parsed.tx]).await.expect("the transaction's rows");
    assert_eq!(rows.len(), 60, "and a reader reads the whole transaction instead");
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn named_positions_read_back_exactly_their_rows_and_an_unnamed_write_names_nothing(pool: PgPool) {
    migrated(&pool).await;
    let store = ChunkStore::new(pool.clone().into(), 1);
    store.create_streams(&["a", "b"]).await.expect("the streams");
    let line = |n: i64| Line { text: format!(r#"{{"n":{n}}}"#), event: None };
    for round in 0..3 {
        let a = Append { stream_id: "a".into(), chunks: vec![line(round * 2), line(round * 2 + 1)] };
        let b = Append { stream_id: "b".into(), chunks: vec![line(100 + round)] };
        store.append(&[&a, &b]).await.expect("flushed");
    }
    // a's positions 3–4 and 6, b's 1–3: in the ranges' order, each key's rows by position.
    let rows = store.rows_in(&[range("a", 2, 4), range("a", 5, 6), range("b", 0, 3)]).await.expect("the rows");
    let got: Vec<(&str, i64, &str)> =
        rows.iter().map(|r| (r.stream_id.as_str(), r.position, r.chunk.as_str())).collect();
    assert_eq!(
        got,
        [
            ("a", 3, r#"{"n":2}"#),
            ("a", 4, r#"{"n":3}"#),
            ("a", 6, r#"{"n":5}"#),
            ("b", 1, r#"{"n":100}"#),
            ("b", 2, r#"{"n":101}"#),
            ("b", 3, r#"{"n":102}"#)
        ]
    );

    // A write that does not name what it wrote (`wrote`) makes the notification name nothing, even with
    // named keys beside it: a reader must then read the whole transaction, not trust a partial list.
    let mut listener = listening(&pool).await;
    let mut tx = FeedTx::begin(&pool.clone().into(), Feed::Events).await.expect("a transaction");
    tx.wrote_key("q", 0, 1);
    tx.wrote();
    tx.commit().await.expect("committed");
    // The flushes' notifications above come after their commits, from the store's notifier: skip them.
    let parsed = loop {
        let parsed = feed::parse_notice(listener.recv().await.expect("a notification").payload()).expect("a payload");
        if parsed.feed != Feed::Chunks {
            break parsed;
        }
    };
    assert_eq!((parsed.feed, parsed.keys), (Feed::Events, None));
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_wake_naming_many_streams_reads_their_rows_through_the_index_not_every_chunk(pool: PgPool) {
    migrated(&pool).await;
    // 400 streams of 150 chunks, analysed: enough for the planner to weigh a scan against 84 index reads.
    sqlx::raw_sql(
        "insert into streams (stream_id, last_position) select 'stream-' || s, 150 from generate_series(1, 400) s;
         insert into chunks (stream_id, position, chunk, bytes)
         select 'stream-' || s, p, '{}'::json, 2 from generate_series(1, 400) s, generate_series(1, 150) p;
         analyze chunks",
    )
    .execute(&pool)
    .await
    .expect("the chunks");
    let ranges: Vec<_> = (1..=84).map(|s| range(&format!("stream-{s}"), 100, 101)).collect();
    // A plan for these 84 ranges, and the generic one the request pool caches.
    for plans in ["force_custom_plan", "force_generic_plan"] {
        let pool = one_connection(&pool, &[("plan_cache_mode", plans)]).await;
        let store = ChunkStore::new(pool.clone().into(), 1);
        let before = chunks_read_by_scans(&pool).await;
        let rows = store.rows_in(&ranges).await.expect("the rows");
        assert_eq!(rows.len(), 84, "{plans}: one row of each stream named");
        assert!(rows.iter().all(|row| row.position == 101));
        assert_eq!(chunks_read_by_scans(&pool).await, before, "{plans}: no chunk read by a sequential scan");
    }
}
