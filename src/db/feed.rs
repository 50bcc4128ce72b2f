//! The feeds — tables readers follow live — and the one way to write to them: [`FeedTx`], a transaction
//! that ends with one NOTIFY naming itself.
//!
//! Commit order is not sequence order: two writers draw 100 and 101, 101 commits first, and a reader that
//! moved past 101 never sees 100. A feed-wide lock would fix that by serialising every writer of the cluster,
//! and one frozen replica holding it would stop everyone's ingest. Instead each feed picks the cheapest
//! mechanism that still proves "a reader that advanced past N never misses a row committed later below N":
//!
//! - **Per key** (a stream's chunks, a conversation's messages): the writer bumps the key's counter row
//!   (`last_position`) in its transaction. The row lock is held to commit, so only writers of the same key
//!   wait for each other and one key's positions commit in order; a per-key reader advances by position.
//!   The row also keeps `last_tx`, its last writer's transaction id, and a writer whose own id is not above it
//!   does not write the key (it retries in a new transaction). So one key's writers have increasing ids too,
//!   which the global order below relies on. (A transaction gets its id at its first write, possibly before
//!   it waits for a key another writer holds; without this rule the later committer could hold the lower id.)
//! - **Globally** (`GET /stream?watch=true`, `GET /messages?watch=true`): rows carry their transaction id
//!   (`tx`, xid8). A reader delivers rows in `(tx, sequence)` order and only below the visibility horizon
//!   `pg_snapshot_xmin(pg_current_snapshot())`: every transaction below it has ended, so nothing can commit
//!   before the reader's cursor later. A transaction that stays open holds the horizon back (a frozen replica
//!   until Postgres evicts it) but never blocks a per-key reader or another writer.
//! - **Questions** keep one short transaction lock for the whole feed: their changes are rare (a person
//!   answers), their `resourceVersion` is a Kubernetes-style global version that watches resume from, and
//!   `lock_timeout`/`idle_in_transaction_session_timeout` bound how long a frozen holder can keep it.
//!
//! Notifications carry the feed, the writer's transaction id and, when they fit, the keys it wrote with their
//! positions ([`super::notice`]), never bodies: each replica reads the rows its readers follow once and hands
//! them to its readers in memory.

use super::pool::Pool;
use sqlx::{Postgres, Transaction};

use super::{
    StoreResult,
    notice::{self, KeyRange},
    receipt::{self, Receipt},
};

/// The one NOTIFY channel every replica LISTENs on.
pub const CHANNEL: &str = "ark_broker";

/// The prefix of a NOTIFY that is no feed's: `complete:<stream id>` asks the replicas holding open chunk
/// POSTs of that stream to append its completion marker after their lines (see `streams::completion`).
pub const COMPLETION_REQUEST: &str = "complete";

/// Longest stream id a completion request names; longer ones are sent without it (`complete:`), and every
/// replica then checks all its open POSTs, so a payload stays within 256 bytes.
const MAX_KEY_IN_PAYLOAD: usize = 200;

/// The NOTIFY payload of a completion request for `stream_id`.
pub fn completion_payload(stream_id: &str) -> String {
    let key = if stream_id.len() <= MAX_KEY_IN_PAYLOAD { stream_id } else { "" };
    format!("{COMPLETION_REQUEST}:{key}")
}

/// Reads a payload written by [`completion_payload`]: `Some(None)` asks about every open POST.
pub fn parse_completion(payload: &str) -> Option<Option<String>> {
    let key = payload.strip_prefix(COMPLETION_REQUEST)?.strip_prefix(':')?;
    Some((!key.is_empty()).then(|| key.to_owned()))
}

/// A parsed notification of a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The feed written.
    pub feed: Feed,
    /// The writer's transaction id.
    pub tx: i64,
    /// What it wrote, when the notification says (every key it wrote in this feed).
    pub keys: Option<Vec<KeyRange>>,
}

/// Reads a feed's notification; `None` for anything else (a completion request, a heartbeat).
pub fn parse_notice(payload: &str) -> Option<Notice> {
    let (name, rest) = payload.split_once(':')?;
    let feed = Feed::ALL.into_iter().find(|feed| feed.name() == name)?;
    let (tx, keys) = match rest.split_once(':') {
        Some((tx, list)) => (tx, serde_json::from_str::<Vec<KeyRange>>(list).ok()),
        None => (rest, None),
    };
    Some(Notice { feed, tx: tx.parse().ok()?, keys })
}

/// Declares [`Feed`] from one list: each feed's variant, its number and its name. The number makes the key
/// of its transaction lock ([`Feed::lock_key`]), which replicas of two versions must agree on, so it never
/// changes and is never reused; the name is the feed's NOTIFY prefix and its metrics' `feed` label.
macro_rules! feeds {
    ($($(#[$doc:meta])* $feed:ident = $number:literal => $name:literal,)+) => {
        /// A table readers follow live.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Feed {
            $($(#[$doc])* $feed,)+
        }

        impl Feed {
            /// Every feed.
            pub const ALL: [Feed; [$($number),+].len()] = [$(Feed::$feed),+];

            /// The feed's name (NOTIFY payloads, metric labels).
            pub fn name(self) -> &'static str {
                match self {
                    $(Feed::$feed => $name,)+
                }
            }

            /// The feed's number.
            fn number(self) -> i64 {
                match self {
                    $(Feed::$feed => $number,)+
                }
            }
        }
    };
}

feeds! {
    /// `messages`, per conversation and globally.
    Messages = 1 => "messages",
    /// `chunks`, per stream and globally.
    Chunks = 2 => "chunks",
    /// `question_events` (a question's `resourceVersion`).
    Questions = 3 => "questions",
    /// `events`, per query and globally.
    Events = 4 => "events",
    /// `sessions`, globally: a changed session is delivered again.
    Sessions = 5 => "sessions",
    /// `spans`, per trace and globally.
    Spans = 6 => "spans",
    /// `ds_streams` and `ds_messages` (Durable Streams), per stream.
    Durable = 7 => "durable",
}

impl Feed {
    /// The NOTIFY payload saying transaction `tx` committed rows of this feed, naming no keys.
    pub fn payload(self, tx: i64) -> String {
        format!("{}:{tx}", self.name())
    }

    /// Whether writers of this feed take its transaction lock (see the module docs for why only questions).
    fn serialised(self) -> bool {
        matches!(self, Feed::Questions)
    }

    fn lock_key(self) -> i64 {
        // Arbitrary but fixed: "ark" in ASCII, then the feed number.
        0x61_72_6b_00 + self.number()
    }
}

/// A write to a feed: begin, write rows (the store's SQL on [`FeedTx::conn`]), then [`FeedTx::commit`], which
/// queues the NOTIFY naming this transaction when rows were written, inserts the transaction's commit receipt
/// ([`super::receipt`]) and commits. Dropping it rolls back.
#[derive(Debug)]
pub struct FeedTx {
    tx: Transaction<'static, Postgres>,
    pool: Pool,
    feed: Feed,
    wrote: bool,
    /// The keys of the feed written, with their positions, for the notification ([`super::notice`]).
    named: Vec<KeyRange>,
    /// Whether rows were written whose keys were not named: the notification then names none.
    unnamed: bool,
    /// Other feeds the transaction wrote to (e.g. an event changes its session).
    also: Vec<Feed>,
    /// What settles this transaction if its COMMIT goes unanswered.
    receipt: Receipt,
}

impl FeedTx {
    /// Begins a write to `feed` (taking the feed lock where the feed has one).
    pub async fn begin(pool: &Pool, feed: Feed) -> StoreResult<Self> {
        let mut tx = pool.begin().await?;
        if feed.serialised() {
            sqlx::query!("select pg_advisory_xact_lock($1)", feed.lock_key()).execute(&mut *tx).await?;
        }
        let receipt = Receipt::new();
        Ok(FeedTx {
            tx,
            pool: pool.clone(),
            feed,
            wrote: false,
            named: Vec::new(),
            unnamed: false,
            also: Vec::new(),
            receipt,
        })
    }

    /// The connection to run the store's statements on.
    pub fn conn(&mut self) -> &mut sqlx::PgConnection {
        &mut self.tx
    }

    /// Records that rows were written, so readers must hear of this transaction (of all its rows: prefer
    /// [`FeedTx::wrote_key`]).
    pub fn wrote(&mut self) {
        self.wrote = true;
        self.unnamed = true;
    }

    /// Records that positions `after + 1 ..= last` of `key` were written: a replica none of whose readers
    /// follows the key then reads nothing of this transaction.
    pub fn wrote_key(&mut self, key: &str, after: i64, last: i64) {
        self.wrote = true;
        self.named.push(KeyRange { key: key.to_owned(), after, last });
    }

    /// The receipt token, which [`FeedTx::commit`] inserts.
    pub fn receipt_token(&self) -> uuid::Uuid {
        self.receipt.token()
    }

    /// Records that rows of another feed were written too, so its readers hear of this transaction as well.
    pub fn also_wrote(&mut self, feed: Feed) {
        if feed != self.feed && !self.also.contains(&feed) {
            self.also.push(feed);
        }
    }

    /// Notifies (each feed rows were written to), inserts the receipt and commits.
    ///
    /// When the COMMIT goes unanswered (the connection or the server died meanwhile) it may still have
    /// committed, and the server answering next may be another one: the receipt settles it
    /// ([`receipt::settle_lost`]): not committed is [`super::StoreError::Unavailable`], which a writer may try
    /// again; unknown past the ride-through window is [`super::StoreError::Unsettled`].
    pub async fn commit(mut self) -> StoreResult<()> {
        let mut feeds = std::mem::take(&mut self.also);
        let mut suffixes = vec![String::new(); feeds.len()];
        if self.wrote {
            feeds.insert(0, self.feed);
            let named = if self.unnamed { &[][..] } else { &self.named[..] };
            suffixes.insert(0, notice::keys_suffix(named, self.feed.name().len() + 1));
        }
        // Every feed's notification and the receipt in one statement: a round trip fewer while the rows' locks
        // are held (an event changes its session too).
        let prefixes: Vec<String> = feeds.iter().map(|feed| format!("{}:", feed.name())).collect();
        sqlx::query!(
            r#"with receipt as (insert into commit_receipts (token) values ($3))
               select count(pg_notify($1, p || pg_current_xact_id()::text || s)) as "notified!"
               from unnest($2::text[], $4::text[]) as n(p, s)"#,
            CHANNEL,
            &prefixes,
            self.receipt.token(),
            &suffixes,
        )
        .fetch_one(&mut *self.tx)
        .await?;
        match self.tx.commit().await {
            Ok(()) => Ok(()),
            Err(error) if super::is_unreachable(&error) => receipt::settle_lost(&self.pool, self.receipt, error).await,
            Err(error) => Err(error.into()),
        }
    }

    /// Ends without writing anything.
    pub async fn rollback(self) -> StoreResult<()> {
        self.tx.rollback().await?;
        Ok(())
    }
}

/// A position in a global feed: everything at or before it was delivered. Ordered by transaction id, then by
/// sequence; `(horizon, 0)` means "every row of a transaction below `horizon`".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GlobalCursor {
    /// Transaction id (xid8, as a number).
    pub tx: i64,
    /// Sequence number within the feed.
    pub sequence: i64,
}

impl GlobalCursor {
    /// "Everything of every transaction below `horizon`."
    pub fn horizon(horizon: i64) -> Self {
        GlobalCursor { tx: horizon, sequence: 0 }
    }

    /// The cursor in the primary epoch whose first transaction is `first_tx`: no later than that transaction,
    /// whose id the new primary may have handed out below ids this cursor passed on the old one.
    pub fn rebased(self, first_tx: i64) -> Self {
        self.min(GlobalCursor::horizon(first_tx))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn range(key: &str, after: i64, last: i64) -> KeyRange {
        KeyRange { key: key.to_owned(), after, last }
    }

    #[test]
    fn a_notification_names_its_keys_and_round_trips() {
        let keys = vec![range("stream \"a\":1", 10, 12), range("b", 0, 1)];
        let payload = format!("{}{}", Feed::Chunks.payload(77), notice::keys_suffix(&keys, "chunks:".len()));
        assert!(payload.starts_with("chunks:77:["));
        assert_eq!(parse_notice(&payload), Some(Notice { feed: Feed::Chunks, tx: 77, keys: Some(keys) }));
        assert_eq!(parse_notice("chunks:5"), Some(Notice { feed: Feed::Chunks, tx: 5, keys: None }));
        assert_eq!(parse_notice("chunks:5:not json").map(|n| n.keys), Some(None), "unreadable keys: read it all");
    }

    #[test]
    fn other_payloads_are_no_feeds() {
        assert_eq!(parse_notice("nonsense"), None);
        assert_eq!(parse_notice("chunks:x"), None);
        assert_eq!(parse_notice("complete:stream-a"), None);
    }

    #[test]
    fn payloads_round_trip() {
        for feed in Feed::ALL {
            let parsed = parse_notice(&feed.payload(i64::MAX)).expect("a feed's payload");
            assert_eq!((parsed.feed, parsed.tx, parsed.keys), (feed, i64::MAX, None));
        }
    }

    #[test]
    fn feeds_have_names_and_lock_keys_of_their_own_and_the_lock_keys_never_change() {
        let names: HashSet<&str> = Feed::ALL.iter().map(|feed| feed.name()).collect();
        let keys: HashSet<i64> = Feed::ALL.iter().map(|feed| feed.lock_key()).collect();
        assert_eq!((names.len(), keys.len()), (Feed::ALL.len(), Feed::ALL.len()));
        // Pinned: during a rolling update, replicas of two versions must lock the same keys.
        let known = [
            (Feed::Messages, 0x61_72_6b_01),
            (Feed::Chunks, 0x61_72_6b_02),
            (Feed::Questions, 0x61_72_6b_03),
            (Feed::Events, 0x61_72_6b_04),
            (Feed::Sessions, 0x61_72_6b_05),
            (Feed::Spans, 0x61_72_6b_06),
        ];
        for (feed, key) in known {
            assert_eq!(feed.lock_key(), key, "{}'s lock key", feed.name());
        }
    }

    #[test]
    fn global_cursors_order_by_transaction_then_sequence() {
        let a = GlobalCursor { tx: 10, sequence: 900 };
        let b = GlobalCursor { tx: 11, sequence: 5 };
        assert!(a < b, "a lower transaction id comes first whatever its sequence");
        assert!(GlobalCursor::horizon(11) < b && GlobalCursor::horizon(11) > a);
    }
}
