//! TCP connections from inside a pod's network namespace, for port-forward: as
//! containerd's CRI does for kubelet, the agent connects to `localhost:<port>` of the
//! pod's own loopback.
//!
//! A socket belongs to the network namespace it was created in, whatever thread uses it
//! later. So a short-lived thread of its own `setns`es into the pod's namespace, creates
//! the socket there and hands it back; the connect is then tokio's, from any thread. No
//! thread that runs anything else ever enters the namespace, and the thread's end is
//! its exit (nothing to restore).

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

/// Why a connection into a pod's network namespace failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("opening the pod's network namespace {}: is the pod's sandbox still there?", file.display())]
    Open {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("entering the pod's network namespace {} (setns): the agent needs CAP_SYS_ADMIN", file.display())]
    Enter {
        file: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("creating a TCP socket in the pod's network namespace")]
    Socket(#[source] Errno),
    #[error("starting the thread that enters the pod's network namespace")]
    Thread(#[source] io::Error),
    #[error("the thread that enters the pod's network namespace ended without an answer")]
    ThreadLost,
    #[error("connecting to {addr} in the pod's network namespace")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

impl DialError {
    /// The kind of the failure as an I/O error's (a refused connection stays one).
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            DialError::Connect { source, .. } | DialError::Open { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        }
    }
}

/// Connects to `addr` from inside the network namespace held by `file` (a pod's
/// `<ns dir>/net`).
pub async fn connect(file: &Path, addr: SocketAddr) -> Result<tokio::net::TcpStream, DialError> {
    let fd = socket_in(file, addr).await?;
    let stream = std::net::TcpStream::from(fd);
    let connect = |source| DialError::Connect { addr, source };
    let socket = tokio::net::TcpSocket::from_std_stream(stream);
    socket.connect(addr).await.map_err(connect)
}

/// A new non-blocking TCP socket of `addr`'s family, created in the namespace of `file`.
async fn socket_in(file: &Path, addr: SocketAddr) -> Result<OwnedFd, DialError> {
    let namespace = std::fs::File::open(file)
        .map_err(|source| DialError::Open { file: file.to_owned(), source })?;
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let file = file.to_owned();
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("outpost-netns-dial".to_owned())
        .spawn(move || {
            let made = setns(&namespace, CloneFlags::CLONE_NEWNET)
                .map_err(|source| DialError::Enter { file, source })
                .and_then(|()| {
                    let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
                    socket(family, SockType::Stream, flags, None).map_err(DialError::Socket)
                });
            // The receiver gone (the dial was abandoned): the socket is closed with it.
            let _ = answer.send(made);
        })
        .map_err(DialError::Thread)?;
    answered.await.map_err(|_| DialError::ThreadLost)?
}
