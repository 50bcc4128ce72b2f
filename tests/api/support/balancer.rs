//! A TCP load balancer in front of replicas, as a Kubernetes Service is: each new connection goes to the next
//! replica in rotation; a replica taken out of rotation gets no new connections while the ones it has stay.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::net::{TcpListener, TcpStream};

/// A running balancer.
pub struct Balancer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    rotation: Arc<Mutex<Vec<SocketAddr>>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Balancer {
    /// Starts a balancer over the replicas at `bases` (`http://host:port`).
    pub async fn start(bases: &[&str]) -> Self {
        let rotation = Arc::new(Mutex::new(bases.iter().map(|base| address(base)).collect::<Vec<_>>()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the balancer");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let backends = rotation.clone();
        let server = tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((client, _)) = listener.accept().await {
                let candidates = backends.lock().unwrap().clone();
                next = next.wrapping_add(1);
                tokio::spawn(relay(client, candidates, next));
            }
        });
        Balancer { base, rotation, _server: server }
    }

    /// The balancer's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Takes the replica at `base` out of rotation (Kubernetes removing a terminating pod's endpoint).
    pub fn remove(&self, base: &str) {
        let gone = address(base);
        self.rotation.lock().unwrap().retain(|backend| *backend != gone);
    }

    /// Puts the replica at `base` into rotation (a new pod became ready).
    pub fn add(&self, base: &str) {
        self.rotation.lock().unwrap().push(address(base));
    }
}

fn address(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").trim_end_matches('/').parse().expect("a host:port")
}

async fn relay(mut client: TcpStream, candidates: Vec<SocketAddr>, start: usize) {
    for offset in 0..candidates.len() {
        let backend = candidates[(start + offset) % candidates.len()];
        if let Ok(mut server) = TcpStream::connect(backend).await {
            let _ = server.set_nodelay(true);
            let _ = client.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            return;
        }
    }
}
