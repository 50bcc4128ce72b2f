//! Strict fakes of the Slack Web API (`chat.postMessage`, `chat.getPermalink`) and the GitHub REST API (issue
//! comments), over HTTP so several broker processes reach them. They check what the real APIs check — the
//! bearer token, JSON bodies, GitHub's `User-Agent`, `Accept` and API version headers, the payload shapes —
//! record every accepted message, and can answer 429 with `Retry-After` or be down (503).

use std::sync::{Arc, Mutex};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The bot token the Slack fake accepts.
pub const SLACK_TOKEN: &str = "xoxb-test-token";
/// The token the GitHub fake accepts.
pub const GITHUB_TOKEN: &str = "ghp_test_token";

#[derive(Default)]
struct Recorded {
    /// Accepted messages: Slack `chat.postMessage` bodies, GitHub `(owner/repo#n, body)`.
    messages: Vec<Value>,
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
        Self::start(|fake| {
            Router::new()
                .route("/chat.postMessage", post(post_message))
                .route("/chat.getPermalink", post(permalink))
                .with_state(fake)
        })
        .await
    }

    /// Starts the fake GitHub REST API.
    pub async fn github() -> Self {
        Self::start(|fake| {
            Router::new().route("/repos/{owner}/{repo}/issues/{number}/comments", post(comment)).with_state(fake)
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

    /// Waits until at least `n` messages were accepted, or `n` requests answered when `requests` is set.
    pub async fn wait_for(&self, n: usize, requests: bool) {
        let mut changed = self.changed.subscribe();
        loop {
            let seen = if requests { self.requests() } else { self.messages().len() };
            if seen >= n {
                return;
            }
            changed.changed().await.expect("the fake lives as long as the test");
        }
    }

    /// Counts the request; `Some` is the answer when the fake is down or rate limiting.
    fn refuse(&self) -> Option<Response> {
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

    fn accept(&self, message: Value) {
        self.recorded.lock().unwrap().messages.push(message);
        self.changed.send_modify(|n| *n += 1);
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Slack answers API errors with HTTP 200 and `ok: false`.
fn slack_error(error: &str) -> Response {
    Json(json!({"ok": false, "error": error})).into_response()
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
    let blocks_ok = message["blocks"].as_array().is_some_and(|blocks| {
        blocks.iter().all(|b| b["type"].is_string())
            && blocks.iter().filter(|b| b["type"] == "actions").all(|actions| {
                actions["elements"].as_array().is_some_and(|buttons| {
                    buttons.iter().all(|b| {
                        b["type"] == "button"
                            && b["action_id"].is_string()
                            && b["text"]["type"] == "plain_text"
                            && b["text"]["text"].as_str().is_some_and(|t| !t.is_empty() && t.chars().count() <= 75)
                    })
                })
            })
    });
    if !message["text"].is_string() || !blocks_ok {
        return slack_error("invalid_blocks");
    }
    let ts = format!("1700000000.{:06}", fake.messages().len() + 1);
    let id = if channel.starts_with('#') { "C0FAKECHAN" } else { channel };
    fake.accept(message.clone());
    Json(json!({"ok": true, "channel": id, "ts": ts, "message": {"text": message["text"], "ts": ts}})).into_response()
}

async fn permalink(State(fake): State<FakeApi>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let request = match slack_checks(&headers, &body) {
        Ok(request) => request,
        Err(error) => return slack_error(error),
    };
    let (Some(channel), Some(ts)) = (request["channel"].as_str(), request["message_ts"].as_str()) else {
        return slack_error("invalid_arguments");
    };
    let permalink = format!("{}/archives/{channel}/p{}", fake.url, ts.replace('.', ""));
    Json(json!({"ok": true, "channel": channel, "permalink": permalink})).into_response()
}

async fn comment(
    State(fake): State<FakeApi>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let error = |status: StatusCode, message: &str| {
        (status, Json(json!({"message": message, "documentation_url": "https://docs.github.com/rest"}))).into_response()
    };
    if header(&headers, "user-agent").is_empty() {
        return error(
            StatusCode::FORBIDDEN,
            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header",
        );
    }
    if header(&headers, "authorization") != format!("Bearer {GITHUB_TOKEN}") {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if header(&headers, "accept") != "application/vnd.github+json"
        || header(&headers, "x-github-api-version") != "2022-11-28"
    {
        return error(StatusCode::BAD_REQUEST, "expected Accept: application/vnd.github+json and an API version");
    }
    let Ok(comment) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let Some(text) = comment["body"].as_str().filter(|b| !b.is_empty()) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    };
    if repo == "missing" {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let id = 1000 + fake.messages().len() as u64;
    fake.accept(json!({"target": format!("{owner}/{repo}#{number}"), "body": text}));
    let html_url = format!("https://github.com/{owner}/{repo}/issues/{number}#issuecomment-{id}");
    let reply = json!({"id": id, "node_id": "IC_fake", "html_url": html_url, "body": text,
                       "user": {"login": "ark-broker[bot]", "type": "Bot"}});
    (StatusCode::CREATED, Json(reply)).into_response()
}
