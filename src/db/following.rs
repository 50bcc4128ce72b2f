//! A replica that follows the LISTEN relay ([`super::relay`]) instead of listening itself: it passes the
//! relay's lines to its tails as the listener passes its own notifications, ticks the poll, and checks that
//! its own connection (which still holds the replica's liveness lock, but listens to nothing) answers.

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use super::{
    hearing::{self, CompletionRequests, Tails},
    heartbeat,
    relay::{self, Advertised, FollowError, Following},
    tail::TailEvent,
};

/// Why following ended.
pub enum Ended {
    /// `cancel` fired.
    Cancelled,
    /// The replica's own connection was lost: why.
    Session(String),
    /// The relay's stream was lost (the replica listens itself again): why.
    Relay(String),
}

/// Opens the relay's stream and waits for its first line, which says this replica is subscribed.
pub async fn start(
    client: &reqwest::Client,
    target: &Advertised,
    deadline: Duration,
) -> Result<Following, FollowError> {
    let mut stream = relay::follow(client, target, deadline).await?;
    match stream.next().await? {
        None => Ok(stream),
        Some(_) => Err(FollowError::Garbled),
    }
}

/// Where a follower's notifications go.
pub struct Pump<'a> {
    pub tails: &'a Tails,
    pub completions: &'a CompletionRequests,
    pub poll_interval: Duration,
}

impl Pump<'_> {
    /// Passes the relay's notifications on until the relay or the connection is lost (the connection must
    /// answer within `deadline`), or `cancel` fires.
    pub async fn run(
        &self,
        connection: &mut PgListener,
        mut stream: Following,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Ended {
        let mut poll = hearing::every(self.poll_interval);
        let mut checks = hearing::every(heartbeat::EVERY);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ended::Cancelled,
                line = stream.next() => {
                    // Every line that arrived with it goes to the tails at once, so one wake reads for them all.
                    let mut line = Some(line);
                    while let Some(next) = line {
                        match next {
                            Ok(Some(payload)) => hearing::dispatch(&payload, self.tails, self.completions),
                            Ok(None) => {}
                            Err(error) => return Ended::Relay(error.to_string()),
                        }
                        line = stream.buffered();
                    }
                }
                _ = poll.tick() => hearing::broadcast(self.tails, TailEvent::Poll),
                _ = checks.tick() => {
                    let answered = tokio::time::timeout(deadline, sqlx::query("select 1").execute(&mut *connection));
                    match answered.await {
                        Ok(Ok(_)) => {}
                        Ok(Err(error)) => return Ended::Session(error.to_string()),
                        Err(_) => {
                            return Ended::Session(format!("the connection did not answer for {} ms", deadline.as_millis()));
                        }
                    }
                }
            }
        }
    }
}
