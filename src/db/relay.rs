//! The LISTEN relay: with many replicas, one of them LISTENs for the others and passes every notification on
//! over HTTP, so a notifying commit wakes one PostgreSQL backend instead of one per replica (PostgreSQL 15
//! wakes every listening backend of the database, whatever the channel).
//!
//! The replica whose LISTEN connection holds the relay lock is the relay; it says in `listen_relay` where it
//! serves and which token to present. Once at least `--listen-relay-from` replicas are live, the others
//! follow it ([`follow`]) instead of listening themselves; a follower whose relay is lost listens itself again
//! and resyncs, as after a lost LISTEN connection. A follower's stream only carries what the relay's LISTEN
//! session heard while the follower was subscribed: when that session ends, the relay ends every stream
//! ([`Relay::close`]), and a follower resyncs whenever its stream (re)starts. So the relay changes where a
//! hint comes from, never what a reader gets: the tails still read every row by cursor.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use sqlx::postgres::PgListener;
use tokio::sync::{mpsc, watch};

use super::Pool;

/// The relay lock's two keys (`pg_try_advisory_lock(int, int)`), apart from the liveness locks' one key.
pub const LOCK: (i32, i32) = (0x4152_4b42, 1);

/// How many notifications may wait for one follower before its stream is ended (it then resyncs).
const FOLLOWER_QUEUE: usize = 4096;

/// What a follower's stream carries: a notification's payload, or nothing (a ping, sent when the stream was
/// quiet for a [`super::heartbeat::EVERY`], and once as the stream starts).
pub type Line = Option<Arc<str>>;

#[derive(Debug, Default)]
struct Hub {
    token: Option<String>,
    followers: Vec<mpsc::Sender<Arc<str>>>,
    /// The replica started draining: it never serves again.
    retired: bool,
}

/// This replica's side of the relay when it is the relay; cheap to clone.
#[derive(Debug, Clone)]
pub struct Relay {
    hub: Arc<Mutex<Hub>>,
    /// Says when the replica starts draining (the hub's `retired`, for those who wait for it).
    retired: Arc<watch::Sender<bool>>,
}

impl Default for Relay {
    fn default() -> Self {
        Relay { hub: Arc::default(), retired: Arc::new(watch::channel(false).0) }
    }
}

impl Relay {
    fn hub(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The replica is draining: every follower's stream ends, and the relay lock is to be given up so another
    /// replica takes over while this one finishes its requests.
    pub fn retire(&self) {
        {
            let mut hub = self.hub();
            hub.retired = true;
            hub.token = None;
            hub.followers.clear();
        }
        self.retired.send_replace(true);
    }

    /// Whether [`Relay::retire`] was called.
    pub fn is_retired(&self) -> bool {
        self.hub().retired
    }

    /// Resolves once [`Relay::retire`] is called.
    pub async fn retired(&self) {
        let mut retired = self.retired.subscribe();
        let _ = retired.wait_for(|retired| *retired).await;
    }

    /// Starts serving followers under a new token, which it returns; `None` once retired.
    pub fn open(&self) -> Option<String> {
        let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let mut hub = self.hub();
        if hub.retired {
            return None;
        }
        hub.followers.clear();
        hub.token = Some(token.clone());
        Some(token)
    }

    /// Stops serving: every follower's stream ends, and no new one is taken.
    pub fn close(&self) {
        let mut hub = self.hub();
        hub.token = None;
        hub.followers.clear();
    }

    /// How many replicas follow this one now.
    pub fn followers(&self) -> usize {
        self.hub().followers.len()
    }

    /// Passes a notification to every follower. A follower that cannot keep up loses its stream.
    pub fn forward(&self, payload: &str) {
        let mut hub = self.hub();
        if hub.followers.is_empty() {
            return;
        }
        let payload: Arc<str> = payload.into();
        hub.followers.retain(|follower| follower.try_send(payload.clone()).is_ok());
    }

    /// A follower's stream of notifications, when `token` is the one this relay serves under.
    pub fn subscribe(&self, token: &str) -> Option<mpsc::Receiver<Arc<str>>> {
        let mut hub = self.hub();
        let serving = hub.token.as_deref().is_some_and(|own| constant_time_eq(own.as_bytes(), token.as_bytes()));
        if !serving {
            return None;
        }
        let (sender, receiver) = mpsc::channel(FOLLOWER_QUEUE);
        hub.followers.push(sender);
        Some(receiver)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
}

/// Where the relay serves and the token it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    /// `host:port` of its HTTP listener.
    pub address: String,
    /// What a follower presents.
    pub token: String,
}

/// Says in `listen_relay` that this replica is the relay. Called on the connection that holds the lock.
pub async fn advertise(
    connection: &mut PgListener,
    replica_key: i64,
    port: u16,
    token: &str,
    address: Option<&str>,
) -> Result<Advertised, sqlx::Error> {
    // The address PostgreSQL sees this replica connect from is the one the others reach it at (a pod's IP),
    // unless one is configured; a Unix socket means the same machine.
    let host = match address {
        Some(address) => address.to_owned(),
        None => sqlx::query_scalar!(r#"select host(inet_client_addr()) as "host""#)
            .fetch_one(&mut *connection)
            .await?
            .unwrap_or_else(|| "127.0.0.1".to_owned()),
    };
    let address = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    };
    sqlx::query!(
        "insert into listen_relay (replica_key, address, token) values ($1, $2, $3)
         on conflict (only_row) do update set replica_key = excluded.replica_key, address = excluded.address,
                                               token = excluded.token, since = now()",
        replica_key,
        address,
        token,
    )
    .execute(&mut *connection)
    .await?;
    Ok(Advertised { address, token: token.to_owned() })
}

/// Gives the relay lock up (a draining relay), so another replica can take it.
pub async fn unlock(connection: &mut PgListener) -> Result<(), sqlx::Error> {
    sqlx::query!("select pg_advisory_unlock($1, $2)", LOCK.0, LOCK.1).fetch_one(&mut *connection).await?;
    Ok(())
}

/// Takes the relay lock on the LISTEN connection, when nobody holds it.
pub async fn try_lock(connection: &mut PgListener) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"select pg_try_advisory_lock($1, $2) as "taken!""#, LOCK.0, LOCK.1)
        .fetch_one(&mut *connection)
        .await
}

/// The relay to follow, when at least `from` replicas are live and the one advertised holds the relay lock
/// (a row left by a relay that died or lost its session is not).
pub async fn to_follow(pool: &Pool, from: u32) -> Result<Option<Advertised>, sqlx::Error> {
    let row = sqlx::query!(
        r#"select r.address, r.token from listen_relay r
           where (select count(*) from live_replicas l join pg_stat_activity a using (pid)
                  where a.application_name like 'ark-broker-listener %') >= $1
             and exists (select 1 from pg_locks relay join live_replicas l on l.pid = relay.pid
                         where relay.locktype = 'advisory' and relay.granted and relay.objsubid = 2
                           and relay.classid::bigint = $2 and relay.objid::bigint = $3
                           and relay.database = (select oid from pg_database where datname = current_database())
                           and l.replica_key = r.replica_key)"#,
        i64::from(from),
        i64::from(LOCK.0),
        i64::from(LOCK.1),
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| Advertised { address: row.address, token: row.token }))
}

/// Whether no session holds the relay lock (a replica that listens may take it).
pub async fn none_live(pool: &Pool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select not exists (select 1 from pg_locks
                              where locktype = 'advisory' and granted and objsubid = 2
                                and classid::bigint = $1 and objid::bigint = $2
                                and database = (select oid from pg_database where datname = current_database()))
           as "none!""#,
        i64::from(LOCK.0),
        i64::from(LOCK.1),
    )
    .fetch_one(pool)
    .await
}

/// The HTTP client a follower connects to the relay with: plain HTTP inside the cluster, no proxy.
pub fn client(connect_timeout: Duration) -> reqwest::Client {
    // reqwest's builder takes the process's rustls provider even for plain HTTP: ring, as everywhere here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .expect("a client with the ring provider installed builds")
}

/// Why following a relay stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The relay could not be reached, refused the token, or its stream broke.
    #[error("the relay's stream failed: {0}")]
    Stream(#[from] reqwest::Error),
    /// The relay answered, but not with a stream (it stopped being the relay).
    #[error("the relay answered {0}")]
    Refused(reqwest::StatusCode),
    /// Nothing came for longer than the deadline (pings come every second).
    #[error("the relay sent nothing for {0:?}")]
    Silent(Duration),
    /// The relay ended the stream (its LISTEN session ended).
    #[error("the relay ended the stream")]
    Ended,
    /// A line was not a notification.
    #[error("the relay sent a line that is not a notification")]
    Garbled,
}

/// A follower's connection to the relay: [`Following::next`] gives each line in order.
#[derive(Debug)]
pub struct Following {
    response: reqwest::Response,
    buffer: Vec<u8>,
    deadline: Duration,
    /// When the relay last sent anything: the deadline runs from there, across calls of `next`.
    heard_at: tokio::time::Instant,
}

/// Opens the relay's stream; it is subscribed once the first line (a ping) arrives, which
/// [`Following::next`] returns.
pub async fn follow(
    client: &reqwest::Client,
    relay: &Advertised,
    deadline: Duration,
) -> Result<Following, FollowError> {
    let response = tokio::time::timeout(
        deadline,
        client.get(format!("http://{}{}", relay.address, PATH)).bearer_auth(&relay.token).send(),
    )
    .await
    .map_err(|_| FollowError::Silent(deadline))??;
    if !response.status().is_success() {
        return Err(FollowError::Refused(response.status()));
    }
    Ok(Following { response, buffer: Vec::new(), deadline, heard_at: tokio::time::Instant::now() })
}

/// Where a relay serves its stream.
pub const PATH: &str = "/internal/listen-relay";

impl Following {
    /// The next line: a notification's payload, or `None` for a ping. Cancel-safe: a line is taken from the
    /// buffer only when it is returned, and a chunk only when it has arrived.
    pub async fn next(&mut self) -> Result<Line, FollowError> {
        loop {
            if let Some(line) = self.buffered() {
                return line;
            }
            let chunk = tokio::time::timeout_at(self.heard_at + self.deadline, self.response.chunk())
                .await
                .map_err(|_| FollowError::Silent(self.deadline))??;
            match chunk {
                Some(bytes) => {
                    self.heard_at = tokio::time::Instant::now();
                    self.buffer.extend_from_slice(&bytes);
                }
                None => return Err(FollowError::Ended),
            }
        }
    }
}

impl Following {
    /// The next line when it has arrived already (a write of the relay carries all that queued up).
    pub fn buffered(&mut self) -> Option<Result<Line, FollowError>> {
        let end = self.buffer.iter().position(|byte| *byte == b'\n')?;
        let line: Vec<u8> = self.buffer.drain(..=end).collect();
        Some(parse_line(&line[..end]))
    }
}

/// A line as the relay writes it: empty for a ping, else the payload as a JSON string.
pub fn encode_line(line: &Line) -> String {
    match line {
        None => "\n".to_owned(),
        Some(payload) => format!("{}\n", serde_json::Value::String(payload.to_string())),
    }
}

fn parse_line(line: &[u8]) -> Result<Line, FollowError> {
    if line.is_empty() {
        return Ok(None);
    }
    let payload: String = serde_json::from_slice(line).map_err(|_| FollowError::Garbled)?;
    Ok(Some(payload.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_what_was_forwarded() {
        let payload: Arc<str> = "chunks:12:[[\"a\\nb\",0,1]]".into();
        let line = encode_line(&Some(payload.clone()));
        assert_eq!(line.matches('\n').count(), 1, "a payload with a newline is still one line: {line}");
        assert_eq!(parse_line(line.trim_end_matches('\n').as_bytes()).unwrap(), Some(payload));
        assert_eq!(parse_line(encode_line(&None).trim_end_matches('\n').as_bytes()).unwrap(), None);
        assert!(matches!(parse_line(b"not json"), Err(FollowError::Garbled)));
    }

    #[tokio::test]
    async fn only_the_token_served_under_subscribes_and_closing_ends_every_stream() {
        let relay = Relay::default();
        assert!(relay.subscribe("anything").is_none(), "a relay not open takes nobody");
        let token = relay.open().expect("not retired");
        assert!(relay.subscribe(&format!("{token}x")).is_none());
        let mut follower = relay.subscribe(&token).expect("the token");
        relay.forward("feed:1");
        assert_eq!(follower.recv().await.as_deref(), Some("feed:1"));
        relay.close();
        assert_eq!(follower.recv().await, None, "closing ends the stream");
        assert_eq!(relay.followers(), 0);
    }

    #[tokio::test]
    async fn a_retired_relay_ends_its_streams_and_never_opens_again() {
        let relay = Relay::default();
        let token = relay.open().expect("not retired");
        let mut follower = relay.subscribe(&token).unwrap();
        relay.retire();
        assert_eq!(follower.recv().await, None);
        assert!(relay.is_retired() && relay.open().is_none() && relay.subscribe(&token).is_none());
        tokio::time::timeout(Duration::from_secs(1), relay.retired()).await.expect("resolves once retired");
    }

    #[tokio::test]
    async fn a_follower_that_cannot_keep_up_loses_its_stream() {
        let relay = Relay::default();
        let token = relay.open().expect("not retired");
        let mut slow = relay.subscribe(&token).unwrap();
        for n in 0..=FOLLOWER_QUEUE {
            relay.forward(&format!("feed:{n}"));
        }
        assert_eq!(relay.followers(), 0, "dropped once its queue was full");
        let mut received = 0;
        while slow.recv().await.is_some() {
            received += 1;
        }
        assert_eq!(received, FOLLOWER_QUEUE, "what was queued still arrives, then the stream ends");
    }
}
