//! Group commit of Durable Streams appends ([`DurableStore::append_all`]): a group's appends are decided in
//! their order, each against the stream as the ones before it left it, and what is taken is stored once.

use ark_broker::durable::{
    DurableStore,
    appends::Appended,
    model::{Append, Create, Expiry, Producer},
    rules::AppendRefusal,
    writes::Created,
};
use bytes::Bytes;
use sqlx::PgPool;

use super::migrated;

fn append(body: &'static [u8]) -> Append {
    Append {
        content_type: Some("text/plain".into()),
        close: false,
        stream_seq: None,
        producer: None,
        body: Bytes::from_static(body),
    }
}

fn by(seq: i64, body: &'static [u8]) -> Append {
    Append { producer: Some(Producer { id: "writer".into(), epoch: 0, seq }), ..append(body) }
}

async fn stream(store: &DurableStore, path: &str) {
    let create = Create {
        content_type: Some("text/plain".into()),
        expiry: Expiry::Never,
        closed: false,
        fork: None,
        body: Bytes::new(),
    };
    let created = store.create(path, &create).await.expect("a create");
    assert!(matches!(created, Created::New(_)), "{path} is new: {created:?}");
}

/// Everything stored on the stream at `path`, as one string.
async fn contents(store: &DurableStore, path: &str) -> String {
    let stream = store.find(path).await.expect("a read").expect("the stream");
    let pieces = store.read(&stream, 0, stream.tail, 1000, 1 << 20).await.expect("a read");
    pieces.iter().map(|p| String::from_utf8_lossy(&p.data).into_owned()).collect()
}

fn tail(answer: &Appended) -> i64 {
    match answer {
        Appended::Taken(stream) | Appended::Duplicate(stream, _) | Appended::Refused(stream, _) => stream.tail,
        other => panic!("no stream: {other:?}"),
    }
}

#[sqlx::test(migrations = false)]
async fn a_groups_appends_are_decided_in_order_each_after_the_ones_before(pool: PgPool) {
    migrated(&pool).await;
    let store = DurableStore::new(pool.clone().into());
    stream(&store, "a").await;
    stream(&store, "b").await;

    let close = Append { close: true, ..append(b"") };
    let group = [
        ("a", by(0, b"one ")),
        ("b", append(b"bee")),
        ("a", by(1, b"two ")),
        ("a", by(1, b"two again ")),
        ("a", by(3, b"four ")),
        ("missing", append(b"x")),
        ("a", by(2, b"three")),
        ("b", close.clone()),
        ("b", append(b"after the close")),
        ("b", close),
    ];
    let appends: Vec<(&str, &Append)> = group.iter().map(|(path, request)| (*path, request)).collect();
    let answers = store.append_all(&appends).await.expect("the group commits");

    assert_eq!(answers.len(), group.len());
    assert!(matches!(&answers[0], Appended::Taken(s) if s.tail == 4), "{:?}", answers[0]);
    assert!(matches!(&answers[1], Appended::Taken(s) if s.tail == 3), "{:?}", answers[1]);
    assert!(matches!(&answers[2], Appended::Taken(s) if s.tail == 8), "{:?}", answers[2]);
    assert!(matches!(&answers[3], Appended::Duplicate(s, Some(1)) if s.tail == 8), "{:?}", answers[3]);
    assert!(
        matches!(&answers[4], Appended::Refused(_, AppendRefusal::SeqGap { expected: 2, received: 3 })),
        "{:?}",
        answers[4]
    );
    assert!(matches!(&answers[5], Appended::NotFound), "{:?}", answers[5]);
    assert_eq!(tail(&answers[6]), 13);
    assert!(matches!(&answers[7], Appended::Taken(s) if s.closed && s.tail == 3), "{:?}", answers[7]);
    assert!(matches!(&answers[8], Appended::Refused(_, AppendRefusal::Closed)), "{:?}", answers[8]);
    assert!(matches!(&answers[9], Appended::Duplicate(s, None) if s.closed), "{:?}", answers[9]);

    assert_eq!(contents(&store, "a").await, "one two three");
    assert_eq!(contents(&store, "b").await, "bee");
    let b = store.find("b").await.unwrap().unwrap();
    assert!(b.closed, "the close was stored");
    // The producer's state is the group's last taken append: its next is 3, a retry of 2 a duplicate.
    let next = store.append("a", &by(3, b"!")).await.unwrap();
    assert!(matches!(&next, Appended::Taken(s) if s.tail == 14), "{next:?}");
    let retry = store.append("a", &by(2, b"three")).await.unwrap();
    assert!(matches!(&retry, Appended::Duplicate(_, Some(3))), "{retry:?}");
}

#[sqlx::test(migrations = false)]
async fn a_group_that_takes_nothing_changes_nothing(pool: PgPool) {
    migrated(&pool).await;
    let store = DurableStore::new(pool.clone().into());
    stream(&store, "a").await;
    store.append("a", &by(0, b"kept")).await.unwrap();
    let before: (chrono::DateTime<chrono::Utc>,) =
        sqlx::query_as("select accessed_at from ds_streams where path = 'a'").fetch_one(&pool).await.unwrap();

    let stale = by(0, b"kept");
    let wrong_type = Append { content_type: Some("application/json".into()), ..append(b"{}") };
    let nowhere = append(b"x");
    let answers = store.append_all(&[("a", &stale), ("a", &wrong_type), ("nowhere", &nowhere)]).await.unwrap();

    assert!(matches!(&answers[0], Appended::Duplicate(_, Some(0))), "{:?}", answers[0]);
    assert!(matches!(&answers[1], Appended::Refused(_, AppendRefusal::ContentType)), "{:?}", answers[1]);
    assert!(matches!(&answers[2], Appended::NotFound), "{:?}", answers[2]);
    let after: (chrono::DateTime<chrono::Utc>,) =
        sqlx::query_as("select accessed_at from ds_streams where path = 'a'").fetch_one(&pool).await.unwrap();
    assert_eq!(before, after, "nothing was written, not even the access time");
    assert_eq!(contents(&store, "a").await, "kept");
}
