//! A TCP relay on loopback in front of a server, with the fault a NAT or a stateful
//! firewall makes when it forgets a connection: [`Relay::stall`] stops carrying bytes on
//! every connection open now, in both directions, and closes none of them (no FIN, no
//! RST reaches either end), while new connections are carried as before. A client
//! learns that such a connection is dead only by asking something of it and getting no
//! answer: HTTP/2's ping, or a request's own timeout.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The relay; dropping it closes its socket and every connection, stalled or not.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Cancelled to stall the connections carried now; replaced for the next ones.
    carrying: Mutex<CancellationToken>,
    /// The stalled connections' two sockets, kept open until the relay is dropped.
    stalled: Mutex<Vec<(TcpStream, TcpStream)>>,
    /// Ends every connection task when the relay is dropped.
    stop: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Relay {
    /// Listens on a free port of `127.0.0.1` and carries each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<Relay> {
        let socket = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = socket.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(socket, upstream, shared.clone()));
        Ok(Relay { addr, shared, accept })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection carried now stops carrying bytes and stays open; connections
    /// made after this are carried.
    pub fn stall(&self) {
        let mut carrying = lock(&self.shared.carrying);
        carrying.cancel();
        *carrying = CancellationToken::new();
    }

    /// Connections stalled so far and still held open.
    pub fn stalled(&self) -> usize {
        lock(&self.shared.stalled).len()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.stop.cancel();
        lock(&self.shared.stalled).clear();
    }
}

async fn accept_loop(socket: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while let Ok((client, _)) = socket.accept().await {
        let carrying = lock(&shared.carrying).clone();
        tokio::spawn(carry(client, upstream, carrying, shared.clone()));
    }
}

async fn carry(
    mut client: TcpStream,
    upstream: SocketAddr,
    carrying: CancellationToken,
    shared: Arc<Shared>,
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let stalled = tokio::select! {
        _ = shared.stop.cancelled() => false,
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
        _ = carrying.cancelled() => true,
    };
    if stalled {
        // Both sockets stay open, unread and unwritten.
        lock(&shared.stalled).push((client, server));
    }
}
