//! Mount propagation for a test (D6): the host's `/` made a shared mount while a test
//! needs it (as systemd mounts it; this machine's may be private), back as it was when
//! the test ends, also when it fails. Whether `/` is shared changes what an agent
//! started meanwhile does with its state directory (on a shared mount already, it is not
//! bound on itself), so the tests that depend on either hold [`exclusive`] while they
//! run.

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::workload::text;

static PROPAGATION: Mutex<()> = Mutex::new(());

/// Held by a test whose agent's view of the host's mount propagation must not change
/// under it.
pub fn exclusive() -> MutexGuard<'static, ()> {
    PROPAGATION.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The propagation of the mount at `mount_point` in this process's mountinfo:
/// `Some(true)` shared, `Some(false)` not, `None` no such mount point.
pub fn is_shared(mount_point: &Path) -> Option<bool> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    let target = mount_point.to_string_lossy();
    mountinfo
        .lines()
        .filter(|line| line.split(' ').nth(4) == Some(target.as_ref()))
        .last()
        .map(|line| {
            let optional = line.split(" - ").next().unwrap_or_default();
            optional.split(' ').skip(6).any(|field| field.starts_with("shared:"))
        })
}

/// The host's `/` shared for as long as this lives (non-recursively: its submounts keep
/// their propagation), then private again if it was.
#[derive(Debug)]
pub struct RootShared {
    was_private: bool,
    _exclusive: MutexGuard<'static, ()>,
}

impl RootShared {
    pub fn new() -> RootShared {
        let exclusive = exclusive();
        let was_private = is_shared(Path::new("/")) == Some(false);
        let root = RootShared { was_private, _exclusive: exclusive };
        if was_private {
            mount("--make-shared");
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
    }
}

fn mount(flag: &str) {
    let out = Command::new("mount").args([flag, "/"]).output().expect("run mount");
    assert!(out.status.success(), "mount {flag} /: {}", text(&out));
}
