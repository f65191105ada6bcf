//! The kernel's network change notifications: an rtnetlink socket in the agent's network
//! namespace, subscribed to the groups `ip monitor` listens to by default (links, IPv4
//! and IPv6 addresses and routes). The socket is read only when the kernel queues a
//! message, so an idle host costs no wakeup.
//!
//! The messages are counted, not parsed: the reader only needs to know that something
//! changed. That takes a socket, a bind and a read loop, over nix's calls (already a
//! dependency), rather than netlink-sys and netlink-packet-route, whose message types
//! this would not use.

#[cfg(any(test, feature = "test-util"))]
pub mod testing;
#[cfg(test)]
mod tests;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, socket,
};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::reactor;

/// `RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR |
/// RTMGRP_IPV6_ROUTE`.
const GROUPS: u32 = (libc::RTMGRP_LINK
    | libc::RTMGRP_IPV4_IFADDR
    | libc::RTMGRP_IPV4_ROUTE
    | libc::RTMGRP_IPV6_IFADDR
    | libc::RTMGRP_IPV6_ROUTE) as u32;

/// Room for a batch of messages; a longer datagram is cut, which loses nothing here.
const BUFFER: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot open a netlink route socket: {0}; the kernel's network changes are not followed (is AF_NETLINK allowed to the agent?)"
    )]
    Socket(#[source] Errno),
    #[error("cannot subscribe to the kernel's link, address and route changes: {0}")]
    Subscribe(#[source] Errno),
    #[error("cannot register the netlink socket with the async runtime: {0}")]
    Register(#[source] io::Error),
    #[error("cannot read the kernel's network changes from the netlink socket: {0}")]
    Read(#[source] io::Error),
}

/// A subscription to the kernel's link, address and route changes.
#[derive(Debug)]
pub struct RouteChanges {
    socket: AsyncFd<OwnedFd>,
    buffer: Box<[u8]>,
}

impl RouteChanges {
    /// Subscribes, in the calling thread's network namespace. Needs a tokio runtime.
    pub fn subscribe() -> Result<RouteChanges, Error> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkRoute,
        )
        .map_err(Error::Socket)?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, GROUPS)).map_err(Error::Subscribe)?;
        let socket = reactor::register(fd, Interest::READABLE).map_err(Error::Register)?;
        Ok(RouteChanges { socket, buffer: vec![0; BUFFER].into_boxed_slice() })
    }

    /// Waits until the kernel reports a change, then takes every message queued.
    /// Returns how many datagrams were read. A socket that overflowed (`ENOBUFS`:
    /// messages were dropped) counts as a change.
    pub async fn changed(&mut self) -> Result<usize, Error> {
        loop {
            let mut ready = self.socket.readable().await.map_err(Error::Read)?;
            let mut read = 0;
            loop {
                match recv(ready.get_inner().as_raw_fd(), &mut self.buffer, MsgFlags::empty()) {
                    Ok(_) | Err(Errno::ENOBUFS) => read += 1,
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => {
                        ready.clear_ready();
                        break;
                    }
                    Err(e) => return Err(Error::Read(e.into())),
                }
            }
            if read > 0 {
                return Ok(read);
            }
        }
    }
}
