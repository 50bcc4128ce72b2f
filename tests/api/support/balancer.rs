//! A TCP load balancer in front of replicas, as a Kubernetes Service is: each new connection goes to the next
//! replica in rotation; a replica taken out of rotation gets no new connections while the ones it has stay.
//! Taking one out waits until every connection accepted before has been routed and has passed its client's
//! first bytes (the request) on to its replica (Kubernetes' preStop sleep gives the same guarantee): a
//! replica stopped after that is sent no new connection, and has every request it was sent in its socket.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// A running balancer.
pub struct Balancer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    rotation: Arc<Mutex<Vec<SocketAddr>>>,
    /// Connections accepted that have not yet passed their first bytes to a replica (nor ended).
    routing: Arc<tokio::sync::watch::Sender<usize>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Balancer {
    /// Starts a balancer over the replicas at `bases` (`http://host:port`).
    pub async fn start(bases: &[&str]) -> Self {
        let rotation = Arc::new(Mutex::new(bases.iter().map(|base| address(base)).collect::<Vec<_>>()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the balancer");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let backends = rotation.clone();
        let routing = Arc::new(tokio::sync::watch::channel(0usize).0);
        let counter = routing.clone();
        let server = tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((client, _)) = listener.accept().await {
                let candidates = backends.lock().unwrap().clone();
                next = next.wrapping_add(1);
                counter.send_modify(|n| *n += 1);
                tokio::spawn(relay(client, candidates, next, counter.clone()));
            }
        });
        Balancer { base, rotation, routing, _server: server }
    }

    /// The balancer's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Takes the replica at `base` out of rotation (Kubernetes removing a terminating pod's endpoint) and
    /// waits until every connection accepted before is routed and has passed its first bytes on.
    pub async fn remove(&self, base: &str) {
        let gone = address(base);
        self.rotation.lock().unwrap().retain(|backend| *backend != gone);
        let _ = self.routing.subscribe().wait_for(|routing| *routing == 0).await;
    }

    /// Puts the replica at `base` into rotation (a new pod became ready).
    pub fn add(&self, base: &str) {
        self.rotation.lock().unwrap().push(address(base));
    }
}

fn address(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").trim_end_matches('/').parse().expect("a host:port")
}

async fn relay(
    mut client: TcpStream,
    candidates: Vec<SocketAddr>,
    start: usize,
    routing: Arc<tokio::sync::watch::Sender<usize>>,
) {
    let mut server = None;
    for offset in 0..candidates.len() {
        if let Ok(connected) = TcpStream::connect(candidates[(start + offset) % candidates.len()]).await {
            server = Some(connected);
            break;
        }
    }
    let Some(mut server) = server else {
        routing.send_modify(|n| *n -= 1);
        return;
    };
    let _ = server.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let mut first = vec![0; 64 * 1024];
    let passed = match client.read(&mut first).await {
        Ok(read) if read > 0 => server.write_all(&first[..read]).await.is_ok(),
        _ => false,
    };
    routing.send_modify(|n| *n -= 1);
    if passed {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
