//! A TCP proxy in front of one replica that cuts connections at the moment an answer starts, for every
//! `every`th answer: the request reached the broker and was carried out, its answer is lost, and the client
//! sees its connection reset — what a dropped load balancer connection or a client's own timeout does.
//! Answers are told apart without parsing HTTP: upstream bytes after the client sent some begin a new one
//! (HTTP/1.1 clients do not pipeline).

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// A running proxy.
pub struct CuttingProxy {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    cuts: Arc<AtomicUsize>,
    _server: tokio::task::JoinHandle<()>,
}

impl CuttingProxy {
    /// Starts a proxy to the replica at `base` (`http://host:port`) that cuts every `every`th answer.
    pub async fn start(base: &str, every: usize) -> Self {
        let upstream = base.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = format!("http://{}", listener.local_addr().expect("local address"));
        let answers = Arc::new(AtomicUsize::new(0));
        let cuts = Arc::new(AtomicUsize::new(0));
        let counted = cuts.clone();
        let server = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else { continue };
                tokio::spawn(relay(client, server, every, answers.clone(), counted.clone()));
            }
        });
        CuttingProxy { base: address, cuts, _server: server }
    }

    /// The proxy's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// How many answers it has cut.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

async fn relay(client: TcpStream, server: TcpStream, every: usize, answers: Arc<AtomicUsize>, cuts: Arc<AtomicUsize>) {
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    // Set once the client has sent bytes the server has not yet begun to answer.
    let asked = Arc::new(AtomicBool::new(false));
    let asking = asked.clone();
    let requests = tokio::spawn(async move {
        let mut buffer = vec![0u8; 16 * 1024];
        while let Ok(read) = client_in.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            asking.store(true, Ordering::SeqCst);
            if server_out.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
    });
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read) = server_in.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        if asked.swap(false, Ordering::SeqCst) && (answers.fetch_add(1, Ordering::SeqCst) + 1).is_multiple_of(every) {
            cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if client_out.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    // Dropping both halves of each socket resets the client's connection and ends the server's.
    requests.abort();
}
