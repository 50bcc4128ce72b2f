//! A raw MCP client for the tests: JSON-RPC over Streamable HTTP in both protocol eras, reading JSON and
//! SSE replies alike, so the wire itself is what is checked.

use futures::StreamExt;
use serde_json::{Value, json};

use super::within;

/// The 2025-11-25 era (tasks as a core utility).
pub const LEGACY: &str = "2025-11-25";
/// The 2026-07-28 era (tasks as the SEP-2663 extension).
pub const MODERN: &str = "2026-07-28";

/// Receives notifications as they arrive on a streamed reply.
pub type Observer = tokio::sync::mpsc::UnboundedSender<Value>;

/// One MCP endpoint.
#[derive(Clone)]
pub struct Mcp {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
}

/// A reply: HTTP status, notifications seen before the response, and the JSON-RPC response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Whether it came as SSE (rather than one JSON body).
    pub sse: bool,
    pub notifications: Vec<Value>,
    pub message: Value,
}

impl Reply {
    /// The `result`, failing the test on an error.
    #[track_caller]
    pub fn result(&self) -> &Value {
        assert!(self.message.get("error").is_none(), "unexpected error: {}", self.message);
        &self.message["result"]
    }

    /// The error code, failing the test on a result.
    #[track_caller]
    pub fn error_code(&self) -> i64 {
        self.message["error"]["code"].as_i64().unwrap_or_else(|| panic!("expected an error: {}", self.message))
    }
}

impl Mcp {
    /// A client for `url`.
    pub fn new(url: &str) -> Self {
        Mcp { client: reqwest::Client::new(), url: url.to_owned(), headers: Vec::new() }
    }

    /// The same endpoint, sending `name: value` on every request (identity headers).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A 2025-11-25 request (no session: the server is stateless).
    pub async fn legacy(&self, method: &str, params: Value) -> Reply {
        self.legacy_observed(method, params, None).await
    }

    /// Like [`Mcp::legacy`], passing each notification to `observer` as it arrives.
    pub async fn legacy_observed(&self, method: &str, params: Value, observer: Option<Observer>) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.send(&body, &[("mcp-protocol-version", LEGACY)], observer).await
    }

    /// An `initialize` for `version`, as a client sends it (no protocol-version header yet).
    pub async fn initialize(&self, version: &str) -> Reply {
        let params =
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        self.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}), &[], None).await
    }

    /// A 2026-07-28 request with the `_meta` and headers that era requires (added to any `_meta` of `params`);
    /// `tasks` declares the extension.
    pub async fn modern(&self, method: &str, name: Option<&str>, mut params: Value, tasks: bool) -> Reply {
        let capabilities = if tasks { json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}) } else { json!({}) };
        let required = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "ark-broker-tests", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let mut meta = params.get("_meta").cloned().unwrap_or_else(|| json!({}));
        meta.as_object_mut().expect("_meta is an object").extend(required.as_object().cloned().unwrap_or_default());
        params["_meta"] = meta;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        self.send(&body, &headers, None).await
    }

    /// Sends a 2025-11-25 request and returns once the reply's headers arrive (the server is then
    /// working on it); [`Started::finish`] reads the reply.
    pub async fn legacy_started(&self, method: &str, params: Value) -> Started {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        Started { response: self.start(&body, &[("mcp-protocol-version", LEGACY)]).await }
    }

    async fn send(&self, body: &Value, headers: &[(&str, &str)], observer: Option<Observer>) -> Reply {
        read(self.start(body, headers).await, observer).await
    }

    async fn start(&self, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(body);
        for (name, value) in headers.iter().copied().chain(self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()))) {
            request = request.header(name, value);
        }
        within("the MCP reply headers", request.send()).await.expect("POST /mcp")
    }
}

/// A request whose reply has started.
pub struct Started {
    response: reqwest::Response,
}

impl Started {
    /// Reads the rest of the reply.
    pub async fn finish(self) -> Reply {
        read(self.response, None).await
    }

    /// Reads the rest of the reply, or `None` when the connection is cut before the response arrives.
    pub async fn finish_or_cut(self) -> Option<Reply> {
        tokio::spawn(self.finish()).await.ok()
    }
}

async fn read(response: reqwest::Response, observer: Option<Observer>) -> Reply {
    {
        let status = response.status().as_u16();
        assert!(response.headers().get("mcp-session-id").is_none(), "the server is stateless");
        let is_sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap_or_default().starts_with("text/event-stream"));
        if !is_sse {
            let message = within("the MCP reply", response.json::<Value>()).await.unwrap_or(Value::Null);
            return Reply { status, sse: false, notifications: Vec::new(), message };
        }
        let mut notifications = Vec::new();
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        within("the MCP SSE reply", async {
            while let Some(chunk) = body.next().await {
                buffer.push_str(std::str::from_utf8(&chunk.expect("SSE bytes")).expect("UTF-8"));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    for data in frame.lines().filter_map(|line| line.strip_prefix("data:")) {
                        let Ok(message) = serde_json::from_str::<Value>(data.trim()) else { continue };
                        if message.get("id").is_some() {
                            return Reply { status, sse: true, notifications, message };
                        }
                        if let Some(observer) = &observer {
                            let _ = observer.send(message.clone());
                        }
                        notifications.push(message);
                    }
                }
            }
            panic!("the SSE reply ended without a response; notifications: {notifications:?}")
        })
        .await
    }
}
