//! The listening socket and its connections, with the switch tests use to cut the
//! network: [`Listener::cut`] stops accepting (the socket is closed, so connects are
//! refused) and aborts every connection task, so in-flight requests and watch streams
//! end abruptly, with no clean end of the response; [`Listener::restore`] binds the
//! same port again. The socket is on `127.0.0.1`, or on an address in a network
//! namespace the test made ([`Place`]), reached over a link the test can take down.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::http::{self, Shared};

/// Where the server listens: an IPv4 address, in the test's network namespace or in
/// another one (the path of a namespace file, `/run/netns/NAME`).
#[derive(Debug, Clone)]
pub struct Place {
    pub ip: Ipv4Addr,
    pub netns: Option<PathBuf>,
}

impl Default for Place {
    fn default() -> Place {
        Place { ip: Ipv4Addr::LOCALHOST, netns: None }
    }
}

/// The server's socket, up or cut.
pub struct Listener {
    place: Place,
    port: u16,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    serving: Mutex<Option<Serving>>,
    counts: Arc<Counts>,
}

/// The connections the server has open now, by the protocol the client chose, and
/// those it accepted in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Connections {
    pub http1: usize,
    pub h2: usize,
    pub accepted: usize,
}

#[derive(Debug, Default)]
struct Counts {
    http1: AtomicUsize,
    h2: AtomicUsize,
    accepted: AtomicUsize,
}

/// One open connection, counted until it ends (or its task is aborted).
struct Open<'a>(&'a AtomicUsize);

impl<'a> Open<'a> {
    fn new(count: &'a AtomicUsize) -> Open<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Open(count)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("place", &self.place)
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Serving {
    accept: JoinHandle<()>,
    connections: Arc<Mutex<JoinSet<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Listener {
    /// Binds `place` on `port` (`0`: any free port) and serves, unless `down`, in which
    /// case the port is picked and then closed until [`Listener::restore`].
    pub async fn bind(
        place: Place,
        port: u16,
        tls: Option<TlsAcceptor>,
        shared: Arc<Shared>,
        down: bool,
    ) -> io::Result<Listener> {
        let socket = bind(&place, port)?;
        let port = socket.local_addr()?.port();
        let counts = Arc::default();
        let listener = Listener { place, port, tls, shared, serving: Mutex::new(None), counts };
        if !down {
            listener.serve(socket);
        }
        Ok(listener)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.place.ip, self.port))
    }

    /// The connections open now and accepted in all.
    pub fn connections(&self) -> Connections {
        Connections {
            http1: self.counts.http1.load(Ordering::Relaxed),
            h2: self.counts.h2.load(Ordering::Relaxed),
            accepted: self.counts.accepted.load(Ordering::Relaxed),
        }
    }

    /// Whether the server accepts connections.
    pub fn is_up(&self) -> bool {
        lock(&self.serving).is_some()
    }

    fn serve(&self, socket: TcpListener) {
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let accept = tokio::spawn(accept_loop(
            socket,
            self.tls.clone(),
            self.shared.clone(),
            connections.clone(),
            self.counts.clone(),
        ));
        *lock(&self.serving) = Some(Serving { accept, connections });
    }

    /// Stops accepting and aborts every open connection. Returns once the socket is
    /// closed and every connection is gone.
    pub async fn cut(&self) {
        let Some(serving) = lock(&self.serving).take() else { return };
        serving.accept.abort();
        // Cancelled is the expected outcome; the task owned the socket.
        let _ = serving.accept.await;
        let mut connections = std::mem::take(&mut *lock(&serving.connections));
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }

    /// Binds the same port again and serves (a no-op when already serving).
    pub async fn restore(&self) -> io::Result<()> {
        if self.is_up() {
            return Ok(());
        }
        // The port can linger briefly after the cut; retry for a moment.
        let mut attempts = 0;
        let socket = loop {
            match bind(&self.place, self.port) {
                Ok(socket) => break socket,
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts < 50 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.serve(socket);
        Ok(())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(serving) = lock(&self.serving).take() {
            serving.accept.abort();
            // Dropping the JoinSet aborts the connection tasks.
        }
    }
}

fn bind(place: &Place, port: u16) -> io::Result<TcpListener> {
    let addr = SocketAddr::from((place.ip, port));
    let Some(netns) = &place.netns else {
        let socket = TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        return socket.listen(1024);
    };
    // A socket belongs to the network namespace of the thread that makes it: a thread of
    // its own enters the namespace, and the socket outlives the thread.
    let made = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let namespace = std::fs::File::open(netns)?;
                nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET)?;
                // Sets SO_REUSEADDR, as above.
                let socket = std::net::TcpListener::bind(addr)?;
                socket.set_nonblocking(true)?;
                Ok::<_, io::Error>(socket)
            })
            .join()
    });
    let socket =
        made.map_err(|_| io::Error::other("the thread binding in the namespace panicked"))?;
    TcpListener::from_std(socket?)
}

async fn accept_loop(
    socket: TcpListener,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    connections: Arc<Mutex<JoinSet<()>>>,
    counts: Arc<Counts>,
) {
    loop {
        let stream = match socket.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors and the like: back off, keep serving.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut connections = lock(&connections);
        while connections.try_join_next().is_some() {}
        counts.accepted.fetch_add(1, Ordering::Relaxed);
        connections.spawn(connection(stream, tls.clone(), shared.clone(), counts.clone()));
    }
}

async fn connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    counts: Arc<Counts>,
) {
    match tls {
        None => {
            let _open = Open::new(&counts.http1);
            serve_http(stream, shared, None, false).await;
        }
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(stream).await {
                let session = stream.get_ref().1;
                let h2 = session.alpn_protocol() == Some(b"h2");
                let peer = session.peer_certificates().and_then(|chain| chain.first());
                let peer = peer.map(|der| Arc::new(der.clone().into_owned()));
                let _open = Open::new(if h2 { &counts.h2 } else { &counts.http1 });
                serve_http(stream, shared, peer, h2).await;
            }
        }
    }
}

/// Serves one connection, in HTTP/2 when the client chose it at the handshake (every
/// request and watch is then a stream of it), else in HTTP/1.1 with upgrades.
async fn serve_http<S>(stream: S, shared: Arc<Shared>, peer: http::PeerCertificate, h2: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let shared = shared.clone();
        let peer = peer.clone();
        async move { Ok::<_, Infallible>(http::handle(shared, peer, request).await) }
    });
    let stream = TokioIo::new(stream);
    if h2 {
        // kube-apiserver's default (--http2-max-streams-per-connection): 1,000 streams.
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(1000)
            .serve_connection(stream, service)
            .await;
        return;
    }
    // A connection error (the client went away) ends this connection only. Idle
    // keep-alive connections stay open, as clients expect of an API server (hyper's
    // header-read timeout would close them after 30 s and race with reuse).
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .serve_connection(stream, service)
        .with_upgrades()
        .await;
}
