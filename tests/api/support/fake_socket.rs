//! A strict fake of Slack's Socket Mode, served next to the fake Web API ([`super::fake_channels`], which the
//! broker reaches at the same `--slack-api-url`): `apps.connections.open` checks the app-level token and hands
//! out a single-use `ws://` URL; each WebSocket gets `hello`, then the envelopes, `disconnect`s and abrupt
//! drops the test sends it. Every envelope must be acknowledged once, on its connection, within three seconds,
//! with a `payload` only where the envelope accepts one; anything else (late, missing, unknown, twice,
//! malformed, a wrong token) is recorded as a failure the tests assert on.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::{
        Query, State,
        ws::{Message, WebSocket, WebSocketUpgrade},
    },
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::fake_channels::FakeApi;

/// The app-level token the fake accepts.
pub const APP_TOKEN: &str = "xapp-1-A0FAKE-1-0123456789abcdef";
/// How long Slack waits for an acknowledgement.
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);

enum Command {
    Frame(Value),
    Drop,
}

struct Connection {
    commands: mpsc::UnboundedSender<Command>,
    greeted: bool,
    open: bool,
    /// The broker closed it with a close frame (not the fake dropping it, not a reset).
    closed_cleanly: bool,
}

/// An acknowledgement: how long after its envelope it came, and the `payload` it carried.
#[derive(Debug, Clone)]
pub struct Ack {
    pub after: Duration,
    pub payload: Option<Value>,
}

struct Sent {
    envelope_id: String,
    connection: usize,
    at: Instant,
    accepts_payload: bool,
    ack: Option<Ack>,
}

#[derive(Default)]
struct Recorded {
    /// When each `apps.connections.open` with the right token came, refused or not.
    opens: Vec<Instant>,
    /// The next this many `apps.connections.open` get `internal_error`.
    refuse_opens: usize,
    tickets: HashSet<String>,
    connections: Vec<Connection>,
    sent: Vec<Sent>,
    failures: Vec<String>,
}

/// A running fake Socket Mode.
#[derive(Clone)]
pub struct FakeSocket {
    recorded: Arc<Mutex<Recorded>>,
    changed: watch::Sender<u64>,
}

impl FakeSocket {
    /// Starts the fake Slack Web API with Socket Mode next to it.
    pub async fn start() -> (FakeApi, FakeSocket) {
        let socket = FakeSocket { recorded: Arc::default(), changed: watch::channel(0).0 };
        let routes = Router::new()
            .route("/apps.connections.open", post(open))
            .route("/link/", get(link))
            .with_state(socket.clone());
        (FakeApi::slack_with(routes).await, socket)
    }

    /// Sends an envelope of `kind` (`interactive`, `events_api`) carrying `payload` on `connection`; returns
    /// its id.
    pub fn send(&self, connection: usize, kind: &str, payload: Value) -> String {
        let id = format!("{}-fake-{:04}", kind, self.recorded.lock().unwrap().sent.len());
        self.send_as(connection, &id, kind, payload);
        id
    }

    /// Sends envelope `envelope_id` on `connection` (again, when Slack hands one envelope to two connections).
    pub fn send_as(&self, connection: usize, envelope_id: &str, kind: &str, payload: Value) {
        // Slack takes a reply on the acknowledgement of a modal's submission (and of slash commands).
        let accepts_payload = kind == "interactive" && payload["type"] == "view_submission";
        let mut frame = json!({"envelope_id": envelope_id, "type": kind, "payload": payload,
                               "accepts_response_payload": accepts_payload});
        if kind == "events_api" {
            frame["retry_attempt"] = json!(0);
            frame["retry_reason"] = json!("");
        }
        let mut recorded = self.recorded.lock().unwrap();
        let sent =
            Sent { envelope_id: envelope_id.to_owned(), connection, at: Instant::now(), accepts_payload, ack: None };
        recorded.sent.push(sent);
        let _ = recorded.connections[connection].commands.send(Command::Frame(frame));
    }

    /// Sends `disconnect` with `reason` (`refresh_requested`, `warning`, `link_disabled`) on `connection`.
    pub fn disconnect(&self, connection: usize, reason: &str) {
        let frame = json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-socket"}});
        let _ = self.recorded.lock().unwrap().connections[connection].commands.send(Command::Frame(frame));
    }

    /// Drops `connection` abruptly: no close frame, the TCP connection just ends.
    pub fn drop_connection(&self, connection: usize) {
        let _ = self.recorded.lock().unwrap().connections[connection].commands.send(Command::Drop);
    }

    /// Answers the next `n` `apps.connections.open` with `internal_error`.
    pub fn refuse_opens(&self, n: usize) {
        self.recorded.lock().unwrap().refuse_opens = n;
    }

    /// When each `apps.connections.open` came.
    pub fn opens(&self) -> Vec<Instant> {
        self.recorded.lock().unwrap().opens.clone()
    }

    /// Everything the broker did wrong so far, an envelope still unacknowledged past [`ACK_DEADLINE`] included
    /// (unless the fake dropped its connection first).
    pub fn failures(&self) -> Vec<String> {
        let recorded = self.recorded.lock().unwrap();
        let missing = recorded.sent.iter().filter(|s| s.ack.is_none() && s.at.elapsed() > ACK_DEADLINE);
        let missing = missing.filter(|s| {
            let connection = &recorded.connections[s.connection];
            connection.open || connection.closed_cleanly
        });
        let missing = missing.map(|s| format!("{} never acknowledged on connection {}", s.envelope_id, s.connection));
        recorded.failures.iter().cloned().chain(missing).collect()
    }

    /// Waits until `n` connections are open and greeted; returns their indexes (every connection ever made
    /// has one, in order).
    pub async fn live(&self, n: usize) -> Vec<usize> {
        self.until(|recorded| {
            let live: Vec<usize> = (0..recorded.connections.len())
                .filter(|&i| recorded.connections[i].open && recorded.connections[i].greeted)
                .collect();
            (live.len() >= n).then_some(live)
        })
        .await
    }

    /// Waits until connection `connection` (the first is 0) is open and greeted.
    pub async fn greeted(&self, connection: usize) {
        self.until(|r| r.connections.get(connection).is_some_and(|c| c.open && c.greeted).then_some(())).await
    }

    /// Waits until `connection` is closed; returns whether the broker closed it with a close frame.
    pub async fn closed(&self, connection: usize) -> bool {
        self.until(|recorded| {
            let connection = &recorded.connections[connection];
            (!connection.open).then_some(connection.closed_cleanly)
        })
        .await
    }

    /// Waits for the acknowledgement of `envelope_id` on `connection`; past [`ACK_DEADLINE`] without one, the
    /// failure is recorded and the test fails.
    pub async fn ack(&self, connection: usize, envelope_id: &str) -> Ack {
        let find = |recorded: &Recorded| {
            recorded.sent.iter().find(|s| s.envelope_id == envelope_id && s.connection == connection).map(|s| s.at)
        };
        let deadline = find(&self.recorded.lock().unwrap()).expect("the envelope was sent there") + ACK_DEADLINE;
        let acked = self.until(|recorded| {
            let sent = recorded.sent.iter().find(|s| s.envelope_id == envelope_id && s.connection == connection)?;
            sent.ack.clone()
        });
        match tokio::time::timeout_at(deadline.into(), acked).await {
            Ok(ack) => ack,
            Err(_) => {
                let failure = format!("no acknowledgement of {envelope_id} on connection {connection} within 3 s");
                self.recorded.lock().unwrap().failures.push(failure.clone());
                panic!("{failure}");
            }
        }
    }

    /// Waits until `check` finds what it looks for in what was recorded.
    async fn until<T>(&self, check: impl Fn(&Recorded) -> Option<T>) -> T {
        let mut changed = self.changed.subscribe();
        loop {
            if let Some(found) = check(&self.recorded.lock().unwrap()) {
                return found;
            }
            changed.changed().await.expect("the fake lives as long as the test");
        }
    }

    fn record(&self, change: impl FnOnce(&mut Recorded)) {
        change(&mut self.recorded.lock().unwrap());
        self.changed.send_modify(|n| *n += 1);
    }

    /// An acknowledgement (or anything else) the broker sent on `connection`.
    fn received(&self, connection: usize, text: &str) {
        self.record(|recorded| {
            let ack: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let Some(envelope_id) = ack["envelope_id"].as_str() else {
                return recorded.failures.push(format!("connection {connection}: not an acknowledgement: {text}"));
            };
            let sent = recorded.sent.iter_mut().find(|s| s.envelope_id == envelope_id && s.connection == connection);
            let failure = match sent {
                None => format!("{envelope_id} acknowledged on connection {connection}, where it was not sent"),
                Some(sent) if sent.ack.is_some() => format!("{envelope_id} acknowledged twice"),
                Some(sent) if ack.get("payload").is_some() && !sent.accepts_payload => {
                    format!("{envelope_id} acknowledged with a payload it does not accept: {text}")
                }
                Some(sent) => {
                    let after = sent.at.elapsed();
                    sent.ack = Some(Ack { after, payload: ack.get("payload").cloned() });
                    if after <= ACK_DEADLINE {
                        return;
                    }
                    format!("{envelope_id} acknowledged after {after:?}")
                }
            };
            recorded.failures.push(failure);
        });
    }
}

/// `apps.connections.open`: the app-level token, then a single-use URL (or `internal_error` when told to).
async fn open(State(socket): State<FakeSocket>, headers: HeaderMap) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let authorization = header("authorization");
    if authorization != format!("Bearer {APP_TOKEN}") {
        let error = if authorization.starts_with("Bearer xoxb-") { "not_allowed_token_type" } else { "invalid_auth" };
        socket.record(|r| r.failures.push(format!("apps.connections.open with {authorization:?}: {error}")));
        return Json(json!({"ok": false, "error": error})).into_response();
    }
    let mut recorded = socket.recorded.lock().unwrap();
    recorded.opens.push(Instant::now());
    if recorded.refuse_opens > 0 {
        recorded.refuse_opens -= 1;
        return Json(json!({"ok": false, "error": "internal_error"})).into_response();
    }
    let ticket = format!("ticket-{}", recorded.opens.len());
    recorded.tickets.insert(ticket.clone());
    drop(recorded);
    let url = format!("ws://{}/link/?ticket={ticket}&app_id=A0FAKE", header("host"));
    Json(json!({"ok": true, "url": url})).into_response()
}

/// The WebSocket of a ticket `apps.connections.open` gave out (once).
async fn link(
    State(socket): State<FakeSocket>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    if !socket.recorded.lock().unwrap().tickets.remove(&ticket) {
        socket.record(|r| r.failures.push(format!("a WebSocket with ticket {ticket:?}, not given out or used")));
        return (StatusCode::UNAUTHORIZED, "invalid ticket").into_response();
    }
    upgrade.on_upgrade(move |ws| serve(socket, ws))
}

/// One connection: `hello`, then the test's frames out and the broker's acknowledgements in.
async fn serve(socket: FakeSocket, mut ws: WebSocket) {
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let connection = {
        let mut recorded = socket.recorded.lock().unwrap();
        let fresh = Connection { commands: commands_tx, greeted: false, open: true, closed_cleanly: false };
        recorded.connections.push(fresh);
        recorded.connections.len() - 1
    };
    let live = socket.recorded.lock().unwrap().connections.iter().filter(|c| c.open).count();
    let hello = json!({"type": "hello", "num_connections": live, "connection_info": {"app_id": "A0FAKE"},
                       "debug_info": {"host": "fake-socket", "approximate_connection_time": 18060}});
    let greeted = ws.send(Message::Text(hello.to_string().into())).await.is_ok();
    socket.record(|r| r.connections[connection].greeted = greeted);
    let cleanly = greeted && exchange(&socket, connection, &mut ws, &mut commands).await;
    // Dropped, the socket goes without a close frame: the broker sees the connection reset.
    drop(ws);
    socket.record(|r| {
        let c = &mut r.connections[connection];
        (c.open, c.closed_cleanly) = (false, cleanly);
    });
}

/// Sends the test's frames and takes the broker's until either side ends the connection; whether the broker
/// ended it with a close frame.
async fn exchange(
    socket: &FakeSocket,
    connection: usize,
    ws: &mut WebSocket,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> bool {
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Frame(frame)) => {
                    if ws.send(Message::Text(frame.to_string().into())).await.is_err() {
                        return false;
                    }
                }
                Some(Command::Drop) | None => return false,
            },
            frame = ws.recv() => match frame {
                Some(Ok(Message::Text(text))) => socket.received(connection, text.as_str()),
                Some(Ok(Message::Close(_))) => return true,
                // Pings are answered by the WebSocket itself.
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return false,
            },
        }
    }
}
