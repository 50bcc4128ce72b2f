//! A broker served in-process on `127.0.0.1:0`, on a fresh database.

use ark_broker::{
    app::{self, AppState},
    config::Config,
};
use sqlx::PgPool;
use tokio::{sync::oneshot, task::JoinHandle};

use super::{fresh_database, within};

/// A running in-process broker.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// `http://127.0.0.1:<port>/mcp`.
    pub mcp_url: String,
    /// Its shared state (for the question wake-ups, the pool, the shutdown token).
    pub state: AppState,
    /// A client for requests.
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
}

impl TestApp {
    /// A broker with default settings.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// A broker whose settings `configure` adjusts first.
    pub async fn spawn_with(configure: impl FnOnce(&mut Config)) -> Self {
        let database_url = fresh_database().await;
        let mut config = Config::for_database(&database_url);
        configure(&mut config);
        let state = app::build_state(config, &database_url).await.expect("the broker starts");
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let mcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", http.local_addr().expect("local address"));
        let mcp_url = format!("http://{}/mcp", mcp.local_addr().expect("local address"));
        let (stop, stopped) = oneshot::channel::<()>();
        let listeners = app::Listeners { http, mcp: Some(mcp) };
        let server = tokio::spawn(app::serve(listeners, state.clone(), async move {
            let _ = stopped.await;
        }));
        TestApp { base, mcp_url, state, client: reqwest::Client::new(), stop: Some(stop), server }
    }

    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A pool on the broker's database, for checks in SQL.
    pub fn pool(&self) -> PgPool {
        self.state.pool.inner().clone()
    }

    /// `GET path`, returning the response.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.expect("GET")
    }

    /// `POST path` with a JSON body.
    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> reqwest::Response {
        self.client.post(self.url(path)).json(body).send().await.expect("POST")
    }

    /// `POST path` with a raw body.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
            .expect("POST")
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.client.delete(self.url(path)).send().await.expect("DELETE")
    }

    /// Starts the shutdown sequence (as SIGTERM would) and waits for `serve` to return.
    pub async fn shut_down(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        within("serve to return", &mut self.server).await.expect("serve did not panic")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}
