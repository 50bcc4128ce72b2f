//! Commit receipts against a real PostgreSQL: every feed write leaves one, and settling a write whose COMMIT
//! went unanswered answers from the rows themselves — committed, not committed (and fenced, so it never
//! can), or waits while the transaction still runs.

use std::time::Duration;

use ark_broker::{
    db::{
        feed::{Feed, FeedTx},
        receipt::{self, Receipt, Settled},
    },
    streams::{
        model::Line,
        store::{Append, ChunkStore},
    },
};
use sqlx::PgPool;

use crate::{migrated, wait_for_lock_waiter};

async fn receipts(pool: &PgPool) -> Vec<(uuid::Uuid, bool)> {
    sqlx::query_as("select token, fenced from commit_receipts order by token").fetch_all(pool).await.unwrap()
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn every_write_leaves_its_receipt_and_a_chunk_flush_leaves_one_per_flush(pool: PgPool) {
    migrated(&pool).await;
    let mut tx = FeedTx::begin(&pool.clone().into(), Feed::Events).await.unwrap();
    let token = tx.receipt_token();
    tx.wrote();
    tx.commit().await.unwrap();
    assert_eq!(receipts(&pool).await, [(token, false)]);
    assert_eq!(receipt::settle(&pool.clone().into(), receipt_of(token)).await.unwrap(), Settled::Committed);

    let store = ChunkStore::new(pool.clone().into(), 1);
    store.create_streams(&["s"]).await.unwrap();
    let append = Append { stream_id: "s".into(), chunks: vec![Line { text: r#"{"n":1}"#.into(), event: None }] };
    store.append(&[&append]).await.unwrap();
    store.append(&[&append]).await.unwrap();
    assert_eq!(receipts(&pool).await.len(), 3, "one receipt per flush, none for creating the stream");
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn a_write_the_server_does_not_hold_is_settled_not_committed_and_can_never_commit(pool: PgPool) {
    migrated(&pool).await;
    // A transaction that ran elsewhere (an old primary) and never reached this server.
    let lost = Receipt::new();
    assert_eq!(receipt::settle(&pool.clone().into(), lost).await.unwrap(), Settled::NotCommitted);
    assert_eq!(receipts(&pool).await, [(lost.token(), true)], "the settlement fenced the token");
    // Asked again (the fence's own answer lost): still not committed, not mistaken for the write's receipt.
    assert_eq!(receipt::settle(&pool.clone().into(), lost).await.unwrap(), Settled::NotCommitted);
}

#[ignore = "needs DATABASE_URL: a PostgreSQL whose user may create databases (scripts/test starts one)"]
#[sqlx::test(migrations = false)]
async fn settling_a_write_still_running_waits_for_it_and_sees_how_it_ended(pool: PgPool) {
    migrated(&pool).await;
    for commits in [true, false] {
        let mut tx = FeedTx::begin(&pool.clone().into(), Feed::Events).await.unwrap();
        let token = tx.receipt_token();
        sqlx::query("insert into commit_receipts (token) values ($1)").bind(token).execute(tx.conn()).await.unwrap();
        let settling = tokio::spawn({
            let pool = pool.clone();
            async move { receipt::settle(&pool.clone().into(), receipt_of(token)).await.unwrap() }
        });
        // The settlement waits on the receipt's row lock: it has not answered while the writer runs.
        wait_for_lock_waiter(&pool).await;
        assert!(!settling.is_finished());
        if commits {
            sqlx::query("commit").execute(tx.conn()).await.unwrap();
        } else {
            sqlx::query("rollback").execute(tx.conn()).await.unwrap();
        }
        let expected = if commits { Settled::Committed } else { Settled::NotCommitted };
        assert_eq!(tokio::time::timeout(Duration::from_secs(10), settling).await.unwrap().unwrap(), expected);
        drop(tx);
    }
}

fn receipt_of(token: uuid::Uuid) -> Receipt {
    Receipt::from_token(token)
}
