//! Mount propagation for a test (D6): the host's `/` made a shared mount while a test
//! needs it (as systemd mounts it; this machine's may be private), back as it was when
//! the test ends, also when it fails.
//!
//! While `/` is shared, every mount made under it is shared too and propagates into the
//! containers made meanwhile, so another test's mounts (a pod's namespaces, its volumes)
//! could outlive that test or refuse to go. So whatever makes host mounts or runs
//! containers holds a [`MountUser`] while it lives (a [`crate::pods::Node`], a CNI
//! test's network, a runc bundle), and [`RootShared`] waits until none is held, and
//! holds new ones back until it is dropped (but those of its own thread).

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use crate::workload::text;

#[derive(Debug, Default)]
struct State {
    /// The [`MountUser`]s alive.
    users: usize,
    /// The thread whose [`RootShared`] is alive (or waits for the users to go).
    sharing: Option<ThreadId>,
}

static STATE: Mutex<State> = Mutex::new(State { users: 0, sharing: None });
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait(guard: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    CHANGED.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Held by what makes host mounts or runs containers, while it lives; see the module.
#[derive(Debug)]
pub struct MountUser(());

impl MountUser {
    /// Waits while another thread has `/` shared.
    pub fn new() -> MountUser {
        let me = std::thread::current().id();
        let mut state = state();
        while state.sharing.is_some_and(|thread| thread != me) {
            state = wait(state);
        }
        state.users += 1;
        MountUser(())
    }
}

impl Default for MountUser {
    fn default() -> MountUser {
        MountUser::new()
    }
}

impl Drop for MountUser {
    fn drop(&mut self) {
        let mut state = state();
        state.users = state.users.saturating_sub(1);
        CHANGED.notify_all();
    }
}

/// The mounts an agent running pods made under `dir` (its state directory, which it
/// makes a shared mount, bound on itself), unmounted when this drops, deepest first, for
/// a test whose agent's directories are not a [`crate::pods::Node`]'s (which unmounts
/// its own). It is a [`MountUser`] too.
#[derive(Debug)]
pub struct UnmountUnder {
    dir: std::path::PathBuf,
    _user: MountUser,
}

impl UnmountUnder {
    pub fn new(dir: &Path) -> UnmountUnder {
        UnmountUnder { dir: dir.to_owned(), _user: MountUser::new() }
    }
}

impl Drop for UnmountUnder {
    fn drop(&mut self) {
        for mount in outpost_leaks::mounts_under(&self.dir) {
            let _ = Command::new("umount").arg("--lazy").arg(&mount).output();
        }
    }
}

/// The propagation of the mount at `mount_point` in this process's mountinfo:
/// `Some(true)` shared, `Some(false)` not, `None` no such mount point.
pub fn is_shared(mount_point: &Path) -> Option<bool> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    let target = mount_point.to_string_lossy();
    mountinfo.lines().rfind(|line| line.split(' ').nth(4) == Some(target.as_ref())).map(|line| {
        let optional = line.split(" - ").next().unwrap_or_default();
        optional.split(' ').skip(6).any(|field| field.starts_with("shared:"))
    })
}

/// The host's `/` shared for as long as this lives (non-recursively: its submounts keep
/// their propagation), then private again if it was; meanwhile no other thread's
/// [`MountUser`] is alive. Make it before the test's [`crate::pods::Node`] (which is
/// then dropped first).
#[derive(Debug)]
pub struct RootShared {
    was_private: bool,
}

impl RootShared {
    /// Waits for the other tests' mount users to go (and another `RootShared`), then
    /// shares `/`.
    pub fn new() -> RootShared {
        let me = std::thread::current().id();
        let mut state = state();
        while state.sharing.is_some() {
            state = wait(state);
        }
        state.sharing = Some(me);
        while state.users > 0 {
            state = wait(state);
        }
        drop(state);
        // Made first, so that a failure from here on lets the other tests go on.
        let mut root = RootShared { was_private: false };
        if is_shared(Path::new("/")) == Some(false) {
            let out = Command::new("mount").args(["--make-shared", "/"]).output();
            let out = out.expect("run mount");
            assert!(out.status.success(), "mount --make-shared /: {}", text(&out));
            root.was_private = true;
        }
        root
    }
}

impl Default for RootShared {
    fn default() -> RootShared {
        RootShared::new()
    }
}

impl Drop for RootShared {
    fn drop(&mut self) {
        if self.was_private {
            let _ = Command::new("mount").args(["--make-private", "/"]).output();
        }
        state().sharing = None;
        CHANGED.notify_all();
    }
}
