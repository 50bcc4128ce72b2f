//! An HTTP proxy in front of replicas that sends every request to the next replica in turn, whatever
//! connection it came on: the widest spread a client behind a Service can meet (a TCP balancer, like
//! [`super::balancer`], keeps a kept-alive connection's requests on one replica). Responses stream back as
//! they come, so SSE works through it; the `Host` header is passed on as the client sent it.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderName, StatusCode},
    response::Response,
};

/// A running proxy.
pub struct RotatingProxy {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    _server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Rotation {
    backends: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    client: reqwest::Client,
}

impl RotatingProxy {
    /// Starts a proxy over the replicas at `bases` (`http://host:port`).
    pub async fn start(bases: &[&str]) -> Self {
        super::install_tls_provider();
        let rotation = Rotation {
            backends: Arc::new(bases.iter().map(|base| base.trim_end_matches('/').to_owned()).collect()),
            next: Arc::default(),
            client: reqwest::Client::builder().no_proxy().build().expect("an HTTP client"),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let app = Router::new().fallback(forward).with_state(rotation);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve the proxy");
        });
        RotatingProxy { base, _server: server }
    }

    /// The proxy's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// Headers of one hop, not passed on.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(name.as_str(), "connection" | "keep-alive" | "transfer-encoding" | "te" | "upgrade" | "content-length")
}

async fn forward(State(rotation): State<Rotation>, request: Request) -> Response {
    let turn = rotation.next.fetch_add(1, Ordering::Relaxed);
    let backend = &rotation.backends[turn % rotation.backends.len()];
    let (parts, body) = request.into_parts();
    let target = format!("{backend}{}", parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return status(StatusCode::BAD_REQUEST);
    };
    let mut outgoing = rotation.client.request(parts.method, target).body(body);
    for (name, value) in parts.headers.iter().filter(|(name, _)| !hop_by_hop(name)) {
        outgoing = outgoing.header(name, value);
    }
    let Ok(upstream) = outgoing.send().await else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut response = Response::builder().status(upstream.status());
    for (name, value) in upstream.headers().iter().filter(|(name, _)| !hop_by_hop(name)) {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(upstream.bytes_stream())).expect("a response")
}

fn status(code: StatusCode) -> Response {
    Response::builder().status(code).body(Body::empty()).expect("a response")
}
