//! A TCP proxy in front of PostgreSQL that can silently drop the LISTEN connections through it, as a NAT or
//! a proxy that forgets a connection does: bytes stop in both directions while both sockets stay open, so
//! neither end's TCP notices (keepalive probes are answered by the proxy's own kernel).

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, tcp::OwnedReadHalf, tcp::OwnedWriteHalf},
    sync::watch,
};

/// What a broker's LISTEN connection sends in its startup message: the parameter `application_name` and
/// the start of its value, NUL-separated. The parameter's name is part of it: a request connection's query
/// may name the listeners too (the relay lookup's `like 'ark-broker-listener %'`), and must not be taken for
/// one.
const LISTENER_NAME: &[u8] = b"application_name\0ark-broker-listener";

/// A running proxy.
pub struct PgProxy {
    /// The proxy's `host:port`.
    pub address: String,
    /// Bumped to drop the LISTEN connections open at that moment.
    epoch: Arc<watch::Sender<u64>>,
    _server: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    /// Starts a proxy to the server at `target` (`host:port`).
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().unwrap().to_string();
        let epoch = Arc::new(watch::channel(0u64).0);
        let epochs = epoch.clone();
        let server = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else { continue };
                tokio::spawn(relay(client, server, epochs.subscribe()));
            }
        });
        PgProxy { address, epoch, _server: server }
    }

    /// From now on, the LISTEN connections open through the proxy pass no byte either way.
    pub fn drop_listen_connections(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

async fn relay(client: TcpStream, server: TcpStream, epoch: watch::Receiver<u64>) {
    let opened = *epoch.borrow();
    let is_listener = Arc::new(AtomicBool::new(false));
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Some(is_listener.clone()), is_listener.clone(), epoch.clone(), opened);
    let down = pump(server_read, client_write, None, is_listener, epoch, opened);
    tokio::join!(up, down);
}

/// Copies `from` to `to` until either closes or the connection is dropped; `scan` marks a LISTEN connection
/// from what the client sends first.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    scan: Option<Arc<AtomicBool>>,
    is_listener: Arc<AtomicBool>,
    mut epoch: watch::Receiver<u64>,
    opened: u64,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    let mut scanned = 0;
    loop {
        let dropped = |epoch: &watch::Receiver<u64>| *epoch.borrow() > opened && is_listener.load(Ordering::Relaxed);
        if dropped(&epoch) {
            // Hold both sockets open and pass nothing, for as long as the proxy lives.
            std::future::pending::<()>().await;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            changed = epoch.changed() => match changed {
                Ok(()) => continue,
                Err(_) => return,
            },
        };
        let Ok(read) = read else { return };
        if read == 0 {
            return;
        }
        if let Some(flag) = &scan
            && scanned < 4096
        {
            scanned += read;
            if buffer[..read].windows(LISTENER_NAME.len()).any(|window| window == LISTENER_NAME) {
                flag.store(true, Ordering::Relaxed);
            }
        }
        if dropped(&epoch) {
            continue;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
