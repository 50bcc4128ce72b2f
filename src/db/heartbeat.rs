//! The LISTEN connection's heartbeat: every [`EVERY`] the replica NOTIFYs a channel of its own through the
//! request pool, and the listener expects to hear it back. A ping the server took but the listener did not
//! hear within the deadline means the LISTEN connection is lost although its socket looks open — a backend
//! that stopped, a proxy or NAT that forgot the connection while its own end still answers TCP — which
//! keepalive ([`super::keepalive`]) cannot see. A ping that could not be sent says nothing about the LISTEN
//! connection (the pool may be busy) and is not counted. While other notifications arrive the connection is
//! plainly delivering, and no ping is sent: under load every replica's ping would otherwise be one more
//! notifying commit that wakes every replica's LISTEN backend (PostgreSQL 15 wakes all of them).

use super::pool::Pool;
use std::time::Duration;

use tokio::{sync::mpsc, time::Instant};

/// How often a ping is sent.
pub const EVERY: Duration = Duration::from_secs(1);

/// One replica's heartbeat, driven by its listener's loop.
#[derive(Debug)]
pub struct Heartbeat {
    pool: Pool,
    channel: String,
    /// Which LISTEN connection's heartbeat this is: a ping of an earlier connection that commits late is not
    /// this one's (its numbers started again at 1).
    connection: u32,
    deadline: Duration,
    next: u64,
    /// The oldest ping the server took that has not been heard back, and when it was sent.
    unheard: Option<(u64, Instant)>,
    heard: u64,
    in_flight: bool,
    /// Whether other notifications arrived since the last tick.
    traffic: bool,
    sent_tx: mpsc::UnboundedSender<Option<(u64, Instant)>>,
    sent_rx: mpsc::UnboundedReceiver<Option<(u64, Instant)>>,
}

impl Heartbeat {
    /// A heartbeat on `channel` (unique to this replica), sent through `pool` and expected back within
    /// `deadline`.
    pub fn new(pool: Pool, channel: String, deadline: Duration) -> Self {
        let (sent_tx, sent_rx) = mpsc::unbounded_channel();
        let connection = u32::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..4].try_into().expect("4 bytes"));
        Heartbeat {
            pool,
            channel,
            connection,
            deadline,
            next: 0,
            unheard: None,
            heard: 0,
            in_flight: false,
            traffic: false,
            sent_tx,
            sent_rx,
        }
    }

    /// The channel the listener must LISTEN on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Called every [`EVERY`]: `Err` with how long a ping has gone unheard when that is past the deadline;
    /// otherwise sends the next ping unless one is still on its way, or other notifications arrived since
    /// the last tick and no ping is unheard.
    pub fn tick(&mut self) -> Result<(), Duration> {
        if let Some((_, sent)) = self.unheard
            && sent.elapsed() > self.deadline
        {
            return Err(sent.elapsed());
        }
        if std::mem::take(&mut self.traffic) && self.unheard.is_none() {
            return Ok(());
        }
        if !self.in_flight {
            self.in_flight = true;
            self.next += 1;
            let (pool, channel, number, sent_tx) =
                (self.pool.clone(), self.channel.clone(), self.next, self.sent_tx.clone());
            let payload = format!("{}:{number}", self.connection);
            tokio::spawn(async move {
                let sent = Instant::now();
                let notified = sqlx::query!("select pg_notify($1, $2)", channel, payload).execute(&pool);
                let outcome = match tokio::time::timeout(EVERY, notified).await {
                    Ok(Ok(_)) => Some((number, sent)),
                    _ => None,
                };
                let _ = sent_tx.send(outcome);
            });
        }
        Ok(())
    }

    /// Waits until a ping's send finished: `Some` when the server took it. Pends while none is on its way
    /// (this holds a sender, so the channel never closes).
    pub async fn sent(&mut self) -> Option<(u64, Instant)> {
        self.sent_rx.recv().await.flatten()
    }

    /// Records a finished send (what [`Heartbeat::sent`] returned).
    pub fn record_sent(&mut self, sent: Option<(u64, Instant)>) {
        self.in_flight = false;
        if let Some((number, at)) = sent
            && number > self.heard
            && self.unheard.is_none()
        {
            self.unheard = Some((number, at));
        }
    }

    /// Records that another notification arrived on the LISTEN connection.
    pub fn other_traffic(&mut self) {
        self.traffic = true;
    }

    /// Records a ping heard back (the notification's payload); one of another connection's is ignored.
    pub fn heard(&mut self, payload: &str) {
        let Some((connection, number)) = payload.split_once(':') else { return };
        if connection.parse() != Ok(self.connection) {
            return;
        }
        let Ok(number) = number.parse::<u64>() else { return };
        self.heard = self.heard.max(number);
        if self.unheard.is_some_and(|(unheard, _)| unheard <= self.heard) {
            self.unheard = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(deadline: Duration) -> Heartbeat {
        // Nowhere: every ping fails to send, which must never count as unheard.
        let pool = Pool::from(sqlx::PgPool::connect_lazy("postgres://ark@127.0.0.1:9/nowhere").unwrap());
        Heartbeat::new(pool, "ark_broker_alive_test".into(), deadline)
    }

    #[tokio::test]
    async fn a_ping_taken_but_never_heard_is_a_lost_connection_after_the_deadline() {
        let mut beat = heartbeat(Duration::from_millis(100));
        beat.record_sent(Some((1, Instant::now() - Duration::from_millis(150))));
        assert!(beat.tick().is_err());
        beat.heard(&format!("{}:1", beat.connection.wrapping_add(1)));
        assert!(beat.tick().is_err(), "another connection's ping is not this one's");
        beat.heard(&format!("{}:1", beat.connection));
        assert_eq!(beat.tick(), Ok(()), "heard back: nothing unheard");
    }

    #[tokio::test]
    async fn a_ping_heard_before_its_send_is_recorded_is_not_unheard() {
        let mut beat = heartbeat(Duration::from_millis(100));
        beat.heard(&format!("{}:3", beat.connection));
        beat.record_sent(Some((3, Instant::now() - Duration::from_secs(1))));
        assert_eq!(beat.tick(), Ok(()));
    }

    #[tokio::test]
    async fn no_ping_goes_out_while_other_notifications_arrive_unless_one_is_unheard() {
        let mut beat = heartbeat(Duration::from_secs(10));
        beat.other_traffic();
        assert_eq!(beat.tick(), Ok(()));
        assert!(!beat.in_flight, "the connection delivered since the last tick: no ping");
        assert_eq!(beat.tick(), Ok(()));
        assert!(beat.in_flight, "a quiet tick sends one");
        beat.record_sent(Some((1, Instant::now())));
        beat.other_traffic();
        assert_eq!(beat.tick(), Ok(()));
        assert!(beat.in_flight, "a ping unheard is followed up whatever else arrives");
    }

    #[tokio::test]
    async fn pings_that_cannot_be_sent_say_nothing() {
        let mut beat = heartbeat(Duration::from_millis(1));
        assert_eq!(beat.tick(), Ok(()));
        let sent = beat.sent().await;
        assert_eq!(sent, None, "the pool reaches no server");
        beat.record_sent(sent);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(beat.tick(), Ok(()), "nothing was taken, so nothing is unheard");
    }
}
