//! A stand-in for ark-api's SSE proxy (`proxy_sse_stream` in `ark_api/api/v1/broker.py`), faithful to how it
//! re-frames a broker's stream: it reads the upstream response line by line (httpx `aiter_lines`), drops
//! blank lines and writes every other line followed by a blank line. Frames that are one `data:` line
//! survive; `event:`/`id:` lines or multi-line data would be split into separate frames.

use axum::{Router, body::Body, extract::Request, response::Response};
use futures::StreamExt;

/// A running proxy: `GET {base}/<path>?<query>` relays `GET {broker}/<path>?<query>` re-framed.
pub struct ArkApiProxy {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    _server: tokio::task::JoinHandle<()>,
}

impl ArkApiProxy {
    /// Starts a proxy in front of the broker at `broker`.
    pub async fn start(broker: &str) -> Self {
        let broker = broker.to_owned();
        let app = Router::new().fallback(move |request: Request| relay(broker.clone(), request));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ArkApiProxy { base, _server: server }
    }

    /// The proxy's URL of the broker's `path_and_query`.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.base)
    }
}

async fn relay(broker: String, request: Request) -> Response {
    let path = request.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let upstream = reqwest::get(format!("{broker}{path}")).await.expect("the broker answers");
    let mut bytes = upstream.bytes_stream();
    let lines = async_stream::stream! {
        let mut pending = String::new();
        while let Some(Ok(chunk)) = bytes.next().await {
            pending.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
            // aiter_lines splits on \n, \r\n and \r.
            while let Some(end) = pending.find(['\n', '\r']) {
                let line = pending[..end].to_owned();
                let skip = if pending[end..].starts_with("\r\n") { 2 } else { 1 };
                pending.drain(..end + skip);
                if !line.trim().is_empty() {
                    yield Ok::<_, std::convert::Infallible>(format!("{line}\n\n"));
                }
            }
        }
    };
    Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(lines)).expect("a response")
}
