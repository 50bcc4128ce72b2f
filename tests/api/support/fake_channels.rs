//! Strict fakes of the Slack Web API (`chat.postMessage`, `chat.getPermalink`, `chat.update`, `views.open`,
//! `chat.postEphemeral`, and interactions' `response_url`) and the GitHub REST API (issue comments), over HTTP
//! so several broker processes reach them. They check what the real APIs check — the bearer token, JSON
//! bodies, GitHub's `User-Agent`, `Accept` and API version headers, Block Kit ([`super::fake_blocks`]), that
//! an updated message exists, and that a modal's `trigger_id` was issued within three seconds and is used
//! once — record every accepted call (and every refused one, as `refused`), and can answer 429 with
//! `Retry-After` or be down (503).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::fake_blocks;

/// The bot token the Slack fake accepts.
pub const SLACK_TOKEN: &str = "xoxb-test-token";
/// The token the GitHub fake accepts.
pub const GITHUB_TOKEN: &str = "ghp_test_token";

/// The flags that point a replica at the fake Slack and the fake GitHub.
pub fn channel_args<'a>(slack: &'a FakeApi, github: &'a FakeApi) -> [&'a str; 8] {
    let (slack_url, github_url) = (slack.url.as_str(), github.url.as_str());
    [
        "--slack-bot-token",
        SLACK_TOKEN,
        "--slack-api-url",
        slack_url,
        "--github-token",
        GITHUB_TOKEN,
        "--github-api-url",
        github_url,
    ]
}

#[derive(Default)]
struct Recorded {
    /// Accepted messages: Slack `chat.postMessage` bodies (with the `channelId` and `ts` given), GitHub
    /// `{target: owner/repo#n, body}`.
    messages: Vec<Value>,
    /// Slack's other calls accepted: `(method, body)`; `response_url` for posts to an interaction's URL.
    calls: Vec<(String, Value)>,
    /// `trigger_id`s issued to interactions, and when; those `views.open` took.
    triggers: HashMap<String, Instant>,
    exchanged: std::collections::HashSet<String>,
    /// Requests answered, accepted or not.
    requests: usize,
    /// The next this many requests get 429 with `Retry-After: 1`.
    rate_limited: usize,
    down: bool,
}

/// A running fake (Slack or GitHub).
#[derive(Clone)]
pub struct FakeApi {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    recorded: Arc<Mutex<Recorded>>,
    changed: watch::Sender<u64>,
}

impl FakeApi {
    /// Starts the fake Slack Web API.
    pub async fn slack() -> Self {
        Self::slack_with(Router::new()).await
    }

    /// Starts the fake Slack Web API with `more` of Slack's routes served next to it (Socket Mode's
    /// `apps.connections.open` and WebSocket, [`super::fake_socket`]).
    pub async fn slack_with(more: Router) -> Self {
        Self::start(|fake| {
            Router::new()
                .route("/chat.postMessage", post(post_message))
                // Slack takes this method's arguments as a query or a form, never as JSON.
                .route("/chat.getPermalink", get(permalink))
                .route("/chat.update", post(update))
                .route("/views.open", post(open_view))
                .route("/chat.postEphemeral", post(post_ephemeral))
                .route("/actions/{id}", post(response_url))
                .with_state(fake)
                .merge(more)
        })
        .await
    }

    /// Starts the fake GitHub REST API.
    pub async fn github() -> Self {
        Self::start(|fake| {
            let comments = "/repos/{owner}/{repo}/issues/{number}/comments";
            Router::new().route(comments, post(super::github::create_comment)).with_state(fake)
        })
        .await
    }

    async fn start(app: impl FnOnce(FakeApi) -> Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeApi {
            url: format!("http://{}", listener.local_addr().unwrap()),
            recorded: Arc::default(),
            changed: watch::channel(0).0,
        };
        let app = app(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    /// The messages accepted so far.
    pub fn messages(&self) -> Vec<Value> {
        self.recorded.lock().unwrap().messages.clone()
    }

    /// The bodies of the accepted calls of Slack `method` (`response_url` for interaction responses).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        let recorded = self.recorded.lock().unwrap();
        recorded.calls.iter().filter(|(m, _)| m == method).map(|(_, body)| body.clone()).collect()
    }

    /// Waits until `n` calls of `method` were accepted, and returns them (failing the test after
    /// [`super::PATIENCE`]).
    pub async fn wait_for_calls(&self, method: &str, n: usize) -> Vec<Value> {
        let mut changed = self.changed.subscribe();
        super::within("calls to the fake", async {
            loop {
                let calls = self.calls(method);
                if calls.len() >= n {
                    return calls;
                }
                changed.changed().await.expect("the fake lives as long as the test");
            }
        })
        .await
    }

    /// A `trigger_id` as Slack puts in an interaction; `views.open` takes it for three seconds.
    pub fn trigger(&self) -> String {
        let mut recorded = self.recorded.lock().unwrap();
        let id = format!("{}.98765.{:08x}", 1000 + recorded.triggers.len(), recorded.triggers.len() * 7919);
        recorded.triggers.insert(id.clone(), Instant::now());
        id
    }

    /// An interaction's `response_url`, on this fake.
    pub fn response_url(&self, id: &str) -> String {
        format!("{}/actions/{id}", self.url)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.recorded.lock().unwrap().requests
    }

    /// Answers the next `n` requests with 429 and `Retry-After: 1`.
    pub fn rate_limit(&self, n: usize) {
        self.recorded.lock().unwrap().rate_limited = n;
    }

    /// Makes every request fail with 503 (`true`) or work again (`false`).
    pub fn set_down(&self, down: bool) {
        self.recorded.lock().unwrap().down = down;
    }

    /// Waits until at least `n` messages were accepted, or `n` requests answered when `requests` is set
    /// (failing the test after [`super::PATIENCE`]).
    pub async fn wait_for(&self, n: usize, requests: bool) {
        let mut changed = self.changed.subscribe();
        super::within("messages or requests to the fake", async {
            loop {
                let seen = if requests { self.requests() } else { self.messages().len() };
                if seen >= n {
                    return;
                }
                changed.changed().await.expect("the fake lives as long as the test");
            }
        })
        .await
    }

    /// Counts the request; `Some` is the answer when the fake is down or rate limiting.
    pub(super) fn refuse(&self) -> Option<Response> {
        let mut recorded = self.recorded.lock().unwrap();
        recorded.requests += 1;
        self.changed.send_modify(|n| *n += 1);
        if recorded.down {
            return Some((StatusCode::SERVICE_UNAVAILABLE, "down").into_response());
        }
        if recorded.rate_limited > 0 {
            recorded.rate_limited -= 1;
            return Some((StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "slow down").into_response());
        }
        None
    }

    /// Accepts the message `make` builds from its number (1, 2, …), taken under the lock.
    pub(super) fn accept_numbered<T>(&self, make: impl FnOnce(usize) -> (Value, T)) -> T {
        let mut recorded = self.recorded.lock().unwrap();
        let (message, extra) = make(recorded.messages.len() + 1);
        recorded.messages.push(message);
        drop(recorded);
        self.changed.send_modify(|n| *n += 1);
        extra
    }

    fn accept_call(&self, method: &str, body: Value) {
        self.recorded.lock().unwrap().calls.push((method.to_owned(), body));
        self.changed.send_modify(|n| *n += 1);
    }
}

pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Slack answers API errors with HTTP 200 and `ok: false`.
fn slack_error(error: &str) -> Response {
    Json(json!({"ok": false, "error": error})).into_response()
}

/// Block Kit Slack refuses: `error`, with what is wrong in `response_metadata.messages`, as Slack says it;
/// recorded as a `refused` call.
fn invalid(fake: &FakeApi, method: &str, error: &str, problem: String) -> Response {
    fake.accept_call("refused", json!({"method": method, "error": error, "problem": problem}));
    Json(json!({"ok": false, "error": error, "response_metadata": {"messages": [problem]}})).into_response()
}

/// The request's JSON, or the `error` Slack answers it with.
fn slack_checks(headers: &HeaderMap, body: &[u8]) -> Result<Value, &'static str> {
    if header(headers, "authorization") != format!("Bearer {SLACK_TOKEN}") {
        return Err("invalid_auth");
    }
    if !header(headers, "content-type").starts_with("application/json") {
        return Err("invalid_form_data");
    }
    serde_json::from_slice(body).map_err(|_| "invalid_json")
}

async fn post_message(State(fake): State<FakeApi>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let message = match slack_checks(&headers, &body) {
        Ok(message) => message,
        Err(error) => return slack_error(error),
    };
    let channel = message["channel"].as_str().unwrap_or_default();
    if channel.is_empty() || channel == "#missing" {
        return slack_error("channel_not_found");
    }
    if !message["text"].is_string() {
        return slack_error("no_text");
    }
    // Blocks are optional (a thread reply may be text alone); when given they must be valid.
    if !message["blocks"].is_null()
        && let Err(problem) = fake_blocks::message(&message["blocks"])
    {
        return invalid(&fake, "chat.postMessage", "invalid_blocks", problem);
    }
    let id = if channel.starts_with('#') { "C0FAKECHAN" } else { channel };
    if let Some(thread) = message.get("thread_ts") {
        let known = fake.messages().iter().any(|m| m["ts"] == *thread && m["channelId"] == id);
        if !known {
            return slack_error("thread_not_found");
        }
    }
    let mut recorded = message.clone();
    recorded["channelId"] = json!(id);
    // Numbered under the lock: replicas posting at once each get their own ts.
    let ts = fake.accept_numbered(|n| {
        let ts = format!("1700000000.{n:06}");
        recorded["ts"] = json!(ts);
        (recorded, ts)
    });
    Json(json!({"ok": true, "channel": id, "ts": ts, "message": {"text": message["text"], "ts": ts}})).into_response()
}

async fn permalink(
    State(fake): State<FakeApi>,
    headers: HeaderMap,
    Query(arguments): Query<HashMap<String, String>>,
) -> Response {
    if header(&headers, "authorization") != format!("Bearer {SLACK_TOKEN}") {
        return slack_error("invalid_auth");
    }
    let (Some(channel), Some(ts)) = (arguments.get("channel"), arguments.get("message_ts")) else {
        return slack_error("invalid_arguments");
    };
    let permalink = format!("{}/archives/{channel}/p{}", fake.url, ts.replace('.', ""));
    Json(json!({"ok": true, "channel": channel, "permalink": permalink})).into_response()
}

async fn update(State(fake): State<FakeApi>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let request = match slack_checks(&headers, &body) {
        Ok(request) => request,
        Err(error) => return slack_error(error),
    };
    let posted = fake.messages().into_iter().any(|m| m["channelId"] == request["channel"] && m["ts"] == request["ts"]);
    if !posted {
        return slack_error("message_not_found");
    }
    if !request["text"].is_string() {
        return slack_error("no_text");
    }
    if let Err(problem) = fake_blocks::message(&request["blocks"]) {
        return invalid(&fake, "chat.update", "invalid_blocks", problem);
    }
    fake.accept_call("chat.update", request.clone());
    Json(json!({"ok": true, "channel": request["channel"], "ts": request["ts"], "text": request["text"]}))
        .into_response()
}

async fn open_view(State(fake): State<FakeApi>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let request = match slack_checks(&headers, &body) {
        Ok(request) => request,
        Err(error) => return slack_error(error),
    };
    let Some(trigger) = request["trigger_id"].as_str() else { return slack_error("invalid_arguments") };
    if request["view"].is_null() {
        return slack_error("invalid_arguments");
    }
    {
        let mut recorded = fake.recorded.lock().unwrap();
        match recorded.triggers.get(trigger).copied() {
            None => return slack_error("invalid_trigger_id"),
            Some(at) if at.elapsed() > Duration::from_secs(3) => return slack_error("expired_trigger_id"),
            Some(_) if !recorded.exchanged.insert(trigger.to_owned()) => return slack_error("exchanged_trigger_id"),
            Some(_) => {}
        }
    }
    if let Err(problem) = fake_blocks::view(&request["view"]) {
        return invalid(&fake, "views.open", "invalid_arguments", problem);
    }
    let view = &request["view"];
    fake.accept_call("views.open", request.clone());
    Json(json!({"ok": true, "view": {"id": "V0FAKE", "type": "modal", "private_metadata": view["private_metadata"]}}))
        .into_response()
}

async fn post_ephemeral(State(fake): State<FakeApi>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let request = match slack_checks(&headers, &body) {
        Ok(request) => request,
        Err(error) => return slack_error(error),
    };
    if !request["channel"].is_string() || !request["user"].is_string() || !request["text"].is_string() {
        return slack_error("invalid_arguments");
    }
    fake.accept_call("chat.postEphemeral", request);
    Json(json!({"ok": true, "message_ts": "1700000099.000001"})).into_response()
}

/// An interaction's `response_url`: no token (the URL is the credential), a JSON message.
/// Recorded as `response_url`, and as `response_url <id>` to tell whose interaction it answered.
async fn response_url(
    State(fake): State<FakeApi>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !header(&headers, "content-type").starts_with("application/json") {
        return (StatusCode::BAD_REQUEST, "invalid_payload").into_response();
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(message) if message["text"].is_string() => {
            fake.accept_call(&format!("response_url {id}"), message.clone());
            fake.accept_call("response_url", message);
            "ok".into_response()
        }
        _ => (StatusCode::BAD_REQUEST, "invalid_payload").into_response(),
    }
}
