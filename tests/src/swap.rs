//! Swap for a test (D6): a swap file turned on, and turned off and removed when the test
//! ends, also when it fails. An agent refuses to start on a node with swap on
//! (`failSwapOn`, true by default), and the tests run in parallel: while one test has
//! swap on, [`Agent::start_pods`](crate::agent::Agent::start_pods) waits before starting
//! another test's agent ([`starting`]), except on the thread that turned it on.

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::workload::text;

/// Held shared by agents starting, exclusively while a test's swap is on.
static SWAP: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this thread has swap on (and holds [`SWAP`] exclusively).
    static HOLDS: Cell<bool> = const { Cell::new(false) };
}

/// Held while an agent starts (until it listens, past its swap check), so that no test's
/// swap is on then; `None` on the thread that has swap on.
pub fn starting() -> Option<RwLockReadGuard<'static, ()>> {
    if HOLDS.get() {
        return None;
    }
    Some(SWAP.read().unwrap_or_else(PoisonError::into_inner))
}

/// A swap file in use: `swapoff` and removed on drop (or by [`SwapFile::off`]).
#[derive(Debug)]
pub struct SwapFile {
    path: PathBuf,
    exclusive: Option<RwLockWriteGuard<'static, ()>>,
}

impl SwapFile {
    /// A swap file of `mib` MiB at `path` (on a filesystem swap files may be on: ext4,
    /// xfs), made with `mkswap` and turned on with `swapon`, once no agent is starting.
    pub fn on(path: &Path, mib: usize) -> SwapFile {
        let exclusive = SWAP.write().unwrap_or_else(PoisonError::into_inner);
        HOLDS.set(true);
        // Written out (no holes, which swapon refuses), readable by root alone.
        std::fs::write(path, vec![0u8; mib << 20]).expect("write the swap file");
        let swap = SwapFile { path: path.to_owned(), exclusive: Some(exclusive) };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 600 the swap file");
        run("mkswap", path);
        run("swapon", path);
        swap
    }

    /// Turns the swap off (and lets other tests' agents start again); the file stays until
    /// the drop.
    pub fn off(&mut self) {
        if self.exclusive.is_some() {
            run("swapoff", &self.path);
            self.exclusive = None;
            HOLDS.set(false);
        }
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        if self.exclusive.is_some() {
            let _ = Command::new("swapoff").arg(&self.path).output();
            HOLDS.set(false);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn run(tool: &str, path: &Path) {
    let out = Command::new(tool).arg(path).output().unwrap_or_else(|e| panic!("run {tool}: {e}"));
    assert!(out.status.success(), "{tool} {}: {}", path.display(), text(&out));
}

/// Whether a swap area is in use on this machine (`/proc/swaps` lists more than its
/// header).
pub fn is_on() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|t| t.trim().lines().count() > 1)
}
