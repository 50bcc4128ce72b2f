//! The feeds: tables that readers follow by sequence number, the NOTIFY hints that say a feed advanced,
//! and the writer lock that makes each feed's sequence order equal its commit order.
//!
//! Commit order is not sequence order: two writers draw 100 and 101, 101 commits first, a reader moves past
//! 100 and never sees it. Every feed writer therefore takes the feed's transaction-scoped advisory lock
//! before drawing sequence numbers and holds it until commit, so a committed N implies every row below N is
//! committed. The cost is one serialized commit per flush, which ingest batching amortises.

use sqlx::{PgConnection, PgPool};

use super::StoreResult;

/// The one NOTIFY channel every replica LISTENs on.
pub const CHANNEL: &str = "ark_broker";

/// A table readers follow by sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// `messages`.
    Messages,
    /// `chunks`.
    Chunks,
    /// `question_events` (a question's `resourceVersion`).
    Questions,
}

impl Feed {
    /// Every feed, for the fallback poll.
    pub const ALL: [Feed; 3] = [Feed::Messages, Feed::Chunks, Feed::Questions];

    fn name(self) -> &'static str {
        match self {
            Feed::Messages => "messages",
            Feed::Chunks => "chunks",
            Feed::Questions => "questions",
        }
    }

    fn lock_key(self) -> i64 {
        // Arbitrary but fixed: "ark" in ASCII, then the feed number.
        match self {
            Feed::Messages => 0x61_72_6b_01,
            Feed::Chunks => 0x61_72_6b_02,
            Feed::Questions => 0x61_72_6b_03,
        }
    }

    /// The NOTIFY payload saying this feed reached `sequence`: keys and numbers only, never bodies.
    pub fn payload(self, sequence: i64) -> String {
        format!("{}:{sequence}", self.name())
    }

    /// Reads a payload written by [`Feed::payload`].
    pub fn parse(payload: &str) -> Option<(Feed, i64)> {
        let (name, sequence) = payload.split_once(':')?;
        let feed = Feed::ALL.into_iter().find(|feed| feed.name() == name)?;
        Some((feed, sequence.parse().ok()?))
    }
}

/// Takes `feed`'s writer lock for the rest of the transaction `tx` is in.
pub async fn lock_for_append(tx: &mut PgConnection, feed: Feed) -> StoreResult<()> {
    sqlx::query!("select pg_advisory_xact_lock($1)", feed.lock_key()).execute(tx).await?;
    Ok(())
}

/// Queues the hint that `feed` reached `sequence`; Postgres delivers it at commit.
pub async fn notify(tx: &mut PgConnection, feed: Feed, sequence: i64) -> StoreResult<()> {
    sqlx::query!("select pg_notify($1, $2)", CHANNEL, feed.payload(sequence)).execute(tx).await?;
    Ok(())
}

/// The highest committed sequence of every feed (0 when empty).
pub async fn high_water(pool: &PgPool) -> StoreResult<[(Feed, i64); 3]> {
    let row = sqlx::query!(
        r#"select (select coalesce(max(sequence_number), 0) from messages) as "messages!",
                  (select coalesce(max(sequence_number), 0) from chunks) as "chunks!",
                  (select coalesce(max(resource_version), 0) from questions) as "questions!""#
    )
    .fetch_one(pool)
    .await?;
    Ok([(Feed::Messages, row.messages), (Feed::Chunks, row.chunks), (Feed::Questions, row.questions)])
}

/// The keys (stream ids, question ids) of `feed` that changed after `since`, and the highest sequence seen.
/// Feeds without per-key readers (messages) have no keys.
pub async fn keys_changed_since(pool: &PgPool, feed: Feed, since: i64) -> StoreResult<(Vec<String>, i64)> {
    let rows: Vec<(String, i64)> = match feed {
        Feed::Messages => Vec::new(),
        Feed::Chunks => sqlx::query!(
            r#"select stream_id, max(sequence_number) as "last!" from chunks
               where sequence_number > $1 group by stream_id"#,
            since
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| (row.stream_id, row.last))
        .collect(),
        Feed::Questions => sqlx::query!(
            r#"select question_id, max(resource_version) as "last!" from question_events
               where resource_version > $1 group by question_id"#,
            since
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| (row.question_id, row.last))
        .collect(),
    };
    let last = rows.iter().map(|(_, last)| *last).max().unwrap_or(since);
    Ok((rows.into_iter().map(|(key, _)| key).collect(), last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_stay_small() {
        for feed in Feed::ALL {
            let payload = feed.payload(i64::MAX);
            assert!(payload.len() <= 256);
            assert_eq!(Feed::parse(&payload), Some((feed, i64::MAX)));
        }
        assert_eq!(Feed::parse("nonsense"), None);
        assert_eq!(Feed::parse("chunks:x"), None);
    }
}
