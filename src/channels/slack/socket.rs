//! Slack Socket Mode (`--slack-app-token`): each replica keeps one WebSocket to Slack (`apps.connections.open`
//! with the app-level token gives its URL), over which Slack sends what it would otherwise post to
//! `/channels/slack/*`, so the broker needs no address Slack can reach. What arrives is handed to the same
//! code as those routes ([`super::envelope`]); Slack may send one envelope to two replicas' connections,
//! and the inbound deduplication acts on it once. The connection is made again at once when Slack asks
//! (`disconnect`: a refresh, a warning, the app's Socket Mode turned off), and after a failure with a capped,
//! jittered backoff. Payloads are not signed: the app token, which only the broker holds, is the trust.

use std::{
    hash::{BuildHasher, RandomState},
    time::Duration,
};

use futures::{SinkExt, StreamExt};
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{Slack, envelope::Envelopes};
use crate::{
    channels::{RouteState, send::SEND_TIMEOUT},
    db::outbox,
    telemetry::metrics,
};

/// How often the broker pings Slack, so a connection that died without a word is noticed.
const PING_EVERY: Duration = Duration::from_secs(10);
/// How long Slack may stay silent (no frame, not even a pong) before the connection is taken for dead.
const SILENCE: Duration = Duration::from_secs(30);

/// How a connection ended.
enum Ended {
    /// The replica is shutting down.
    Shutdown,
    /// Slack asked for a new connection (`disconnect`), with its reason.
    Disconnect(String),
    /// The connection failed or could not be made; `up` if it was up (Slack's `hello` came) before.
    Lost { up: bool, error: String },
}

/// Starts this replica's Socket Mode connection, when `--slack-app-token` is set (start-up has checked that
/// the bot token, which answers and updates messages, is set too).
pub fn spawn(state: RouteState, shutdown: CancellationToken) -> Option<JoinHandle<()>> {
    let token = state.config.channels.slack_app_token.clone()?;
    let bot = state.channels.slack.clone()?;
    let http = reqwest::Client::builder().timeout(SEND_TIMEOUT).build().unwrap_or_default();
    let app = Slack::new(http, &state.config.channels.slack_api_url, token);
    Some(tokio::spawn(run(app, Envelopes::new(state, bot), shutdown)))
}

/// Connects, and connects again, until shutdown.
async fn run(app: Slack, envelopes: Envelopes, shutdown: CancellationToken) {
    let (mut failures, mut connected_before) = (0, false);
    loop {
        let ended = connection(&app, &envelopes, &shutdown, connected_before).await;
        metrics::slack_socket_connected(false);
        let wait = match ended {
            Ended::Shutdown => return,
            Ended::Disconnect(reason) => {
                tracing::info!(reason, "Slack asked for a new Socket Mode connection; reconnecting");
                (failures, connected_before) = (0, true);
                continue;
            }
            Ended::Lost { up, error } => {
                connected_before |= up;
                failures = if up { 1 } else { failures + 1 };
                let wait = backoff(failures);
                tracing::warn!(error, failures, wait_ms = wait.as_millis() as u64, "Slack Socket Mode connection lost");
                wait
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The wait before attempt `failures + 1`: the outbox's backoff (0.5 s doubling up to 30 s), then a random
/// point in its upper half, so replicas that lost Slack together do not come back together.
fn backoff(failures: i32) -> Duration {
    let ceiling = Duration::from_millis(outbox::backoff_ms(failures).unsigned_abs());
    // A fresh `RandomState` is seeded randomly: random enough to spread reconnects, without a dependency.
    let random = RandomState::new().hash_one(Instant::now());
    ceiling / 2 + ceiling.mul_f64((random % 1000) as f64 / 2000.0)
}

/// One connection, from asking Slack for its URL until it ends.
async fn connection(app: &Slack, envelopes: &Envelopes, shutdown: &CancellationToken, reconnect: bool) -> Ended {
    let lost = |error: String| Ended::Lost { up: false, error };
    let opened = async {
        let url = app.open_connection().await.map_err(|error| format!("apps.connections.open: {error:?}"))?;
        let connect = tokio_tungstenite::connect_async(url.as_str());
        match tokio::time::timeout(SEND_TIMEOUT, connect).await {
            Ok(Ok((socket, _))) => Ok(socket),
            Ok(Err(error)) => Err(format!("connecting to Socket Mode: {error}")),
            Err(_) => Err(format!("connecting to Socket Mode took over {SEND_TIMEOUT:?}")),
        }
    };
    let socket = tokio::select! {
        () = shutdown.cancelled() => return Ended::Shutdown,
        opened = opened => match opened {
            Ok(socket) => socket,
            Err(error) => return lost(error),
        },
    };
    let (mut sink, mut frames) = socket.split();
    // Each envelope's acknowledgement comes back here from the task acting on it.
    let (acks_tx, mut acks) = mpsc::unbounded_channel::<Message>();
    let mut ping = tokio::time::interval(PING_EVERY);
    let (mut heard, mut up) = (Instant::now(), false);
    let ended = loop {
        tokio::select! {
            () = shutdown.cancelled() => break Ended::Shutdown,
            Some(ack) = acks.recv() => {
                if let Err(error) = sink.send(ack).await {
                    break Ended::Lost { up, error: format!("acknowledging: {error}") };
                }
            }
            _ = ping.tick() => {
                if heard.elapsed() > SILENCE {
                    break Ended::Lost { up, error: format!("nothing heard from Slack for {SILENCE:?}") };
                }
                if let Err(error) = sink.send(Message::Ping(Default::default())).await {
                    break Ended::Lost { up, error: format!("pinging: {error}") };
                }
            }
            frame = frames.next() => {
                heard = Instant::now();
                let text = match frame {
                    None => break Ended::Lost { up, error: "the connection ended".into() },
                    Some(Err(error)) => break Ended::Lost { up, error: error.to_string() },
                    Some(Ok(Message::Close(frame))) => break Ended::Lost { up, error: format!("closed by Slack: {frame:?}") },
                    Some(Ok(Message::Text(text))) => text,
                    // Pings are answered by the WebSocket itself; pongs only tell that Slack is there.
                    Some(Ok(_)) => continue,
                };
                let Ok(frame) = serde_json::from_str::<serde_json::Value>(text.as_str()) else {
                    tracing::warn!(frame = %text.as_str(), "Slack sent a Socket Mode frame that is not JSON");
                    continue;
                };
                match frame["type"].as_str() {
                    Some("hello") => {
                        up = true;
                        metrics::slack_socket_connected(true);
                        if reconnect {
                            metrics::slack_socket_reconnected();
                        }
                        let connections = frame["num_connections"].as_u64();
                        tracing::info!(reconnect, connections, "Slack Socket Mode connected");
                    }
                    Some("disconnect") => {
                        break Ended::Disconnect(frame["reason"].as_str().unwrap_or("unknown").to_owned());
                    }
                    _ => envelopes.take(frame, acks_tx.clone()),
                }
            }
        }
    };
    // Envelopes still being acted on are acknowledged on this connection before it closes (Slack would send
    // them again otherwise), unless it is gone already.
    if !matches!(ended, Ended::Lost { .. }) {
        drop(acks_tx);
        let deadline = Instant::now() + super::envelope::ACK_WITHIN;
        while let Ok(Some(ack)) = tokio::time::timeout_at(deadline, acks.recv()).await {
            if sink.send(ack).await.is_err() {
                break;
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap_and_is_jittered_within_the_upper_half() {
        for (failures, ceiling) in [(1, 500), (2, 1_000), (3, 2_000), (5, 8_000), (7, 30_000), (40, 30_000)] {
            let ceiling = Duration::from_millis(ceiling);
            let waits: Vec<Duration> = (0..50).map(|_| backoff(failures)).collect();
            assert!(waits.iter().all(|w| *w >= ceiling / 2 && *w <= ceiling), "{failures}: {waits:?}");
            assert!(waits.iter().any(|w| *w != waits[0]), "jittered: {waits:?}");
        }
    }
}
