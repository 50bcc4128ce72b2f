//! A chunk POST whose body the test writes as it goes (a line, raw bytes, a broken connection), as a
//! streaming writer keeps one request open, and whose reply it awaits later.

use bytes::Bytes;
use futures::channel::mpsc;

/// The open request: its body's sender and the task awaiting its reply.
pub struct OpenPost {
    pub lines: mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
    pub reply: tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>,
}

impl OpenPost {
    /// Opens `POST url` (NDJSON), with an `Idempotency-Key` when `key` is given.
    pub fn start(client: &reqwest::Client, url: String, key: Option<&str>) -> Self {
        let (lines, body) = mpsc::unbounded();
        let mut request = client.post(url).header("content-type", "application/x-ndjson");
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let reply = tokio::spawn(request.body(reqwest::Body::wrap_stream(body)).send());
        OpenPost { lines, reply }
    }

    /// Sends `text` and a newline.
    pub fn send(&self, text: String) {
        self.write(text + "\n");
    }

    /// Sends `bytes` as they are (a partial line, say).
    pub fn write(&self, bytes: impl Into<Bytes>) {
        self.lines.unbounded_send(Ok(bytes.into())).expect("the request body is still open");
    }
}
