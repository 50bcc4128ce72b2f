//! A minimal SSE client that keeps the frames exactly as the server wrote them, so tests can check framing.

use futures::StreamExt;

use super::within;

/// Reads one SSE response frame by frame.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl SseReader {
    /// Opens `url` and checks that it answers 200 with `text/event-stream`.
    pub async fn open(client: &reqwest::Client, url: &str) -> Self {
        let response = within("the SSE response headers", client.get(url).send()).await.expect("GET");
        assert_eq!(response.status(), 200, "SSE request to {url} failed");
        Self::from_response(response)
    }

    /// Reads an SSE response already received (its status checked by the caller).
    pub fn from_response(response: reqwest::Response) -> Self {
        let headers = response.headers().clone();
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(content_type.starts_with("text/event-stream"), "content-type was {content_type}");
        SseReader { body: response.bytes_stream().boxed(), buffer: String::new(), headers }
    }

    /// The next frame's raw text (without the blank line), or `None` when the server ended the response.
    pub async fn next_frame(&mut self) -> Option<String> {
        within("the next SSE frame", async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let frame = self.buffer[..end].to_owned();
                    self.buffer.drain(..end + 2);
                    return Some(frame);
                }
                match self.body.next().await {
                    Some(Ok(bytes)) => self.buffer.push_str(std::str::from_utf8(&bytes).expect("UTF-8 SSE")),
                    Some(Err(_)) | None => return None,
                }
            }
        })
        .await
    }

    /// The payload of the next `data:` frame, skipping comments; `None` when the response ended.
    pub async fn next_data(&mut self) -> Option<String> {
        loop {
            let frame = self.next_frame().await?;
            if let Some(data) = frame.strip_prefix("data: ") {
                assert!(!data.contains('\n'), "data frames must be single-line: {frame:?}");
                return Some(data.to_owned());
            }
        }
    }

    /// The next `n` data payloads; fails if the response ends first.
    pub async fn take_data(&mut self, n: usize) -> Vec<String> {
        let mut items = Vec::with_capacity(n);
        while items.len() < n {
            match self.next_data().await {
                Some(data) => items.push(data),
                None => panic!("the stream ended after {} of {n} items: {items:?}", items.len()),
            }
        }
        items
    }

    /// Asserts that the server ends the response next (after any comment frames).
    pub async fn expect_end(&mut self) {
        while let Some(frame) = self.next_frame().await {
            assert!(frame.starts_with(':') || frame.starts_with("retry:"), "expected the end, got {frame:?}");
        }
    }
}
