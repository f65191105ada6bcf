//! What tests against the real kernel's network share (here and in the agent's tests,
//! through the `test-util` feature): a network namespace of the test's own, made by the
//! test thread (`unshare`), so it and the links in it go when the thread ends, whatever
//! happens to the test.
// Test helpers: a failed call fails the test.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use nix::sched::{CloneFlags, unshare};

/// A deadlock guard, not a timing: the kernel reports within microseconds.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Network namespaces need root: skips without it, except in CI where it must be there.
pub fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and this test needs root");
    eprintln!("skipping: not root (this would fail in CI)");
    false
}

/// Runs `ip` in the calling thread's network namespace (a child inherits it).
pub fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}: {status}");
}

/// Runs `test` on a runtime of its own in a thread of its own, in a new network
/// namespace: the namespace is the thread's, and goes with it (and with the sockets
/// made in it).
pub fn in_own_netns<F: Future<Output = ()>>(test: impl FnOnce() -> F + Send + 'static) {
    let thread = std::thread::spawn(move || {
        unshare(CloneFlags::CLONE_NEWNET).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(test());
    });
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}
