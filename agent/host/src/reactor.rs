//! Descriptors the kernel signals (an eventfd, a PSI trigger, a netlink socket, a
//! timerfd), registered with tokio's reactor. Tokio's registration is `unsafe`: the
//! descriptor must stay open, and be the same, for as long as it is registered. Every
//! type here owns its descriptor and closes it only when dropped, which [`OwnsFd`] says.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::sys::eventfd::EventFd;
use nix::sys::timerfd::TimerFd;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A value that owns its descriptor: it keeps it open, and `as_raw_fd` returns that same
/// descriptor, until the value is dropped.
pub trait OwnsFd: AsRawFd {}

// Each is, or wraps, an `OwnedFd` it never replaces or closes before its own drop.
impl OwnsFd for OwnedFd {}
impl OwnsFd for File {}
impl OwnsFd for EventFd {}
impl OwnsFd for Timer {}

/// A timerfd (nix's type gives its descriptor as `AsFd` only).
#[derive(Debug)]
pub struct Timer(pub TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers `value`'s descriptor with the reactor.
pub fn register<T: OwnsFd>(value: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `T: OwnsFd` owns its descriptor and closes it only when dropped, and the
    // `AsyncFd` owns `value` (it deregisters before dropping it), so the descriptor stays
    // open, and the same, for as long as it is registered.
    unsafe { AsyncFd::register_with_interest(value, interest) }.map_err(|e| e.into_parts().1)
}
