//! Against the real kernel, in a network namespace of the test's own: the namespace is
//! made by the test thread (`unshare`), so it and the links in it go when the thread
//! ends, whatever happens to the test.

use std::process::Command;
use std::time::Duration;

use nix::sched::{CloneFlags, unshare};

use super::RouteChanges;

/// A deadlock guard, not a timing: the kernel reports within microseconds.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Network namespaces need root: skips without it, except in CI where it must be there.
pub(crate) fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and this test needs root");
    eprintln!("skipping: not root (this would fail in CI)");
    false
}

/// Runs `ip` in the calling thread's network namespace (a child inherits it).
pub(crate) fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}: {status}");
}

async fn next_change(changes: &mut RouteChanges, what: &str) -> usize {
    match tokio::time::timeout(PATIENCE, changes.changed()).await {
        Ok(read) => read.unwrap(),
        Err(_) => panic!("no message from the kernel after {what}"),
    }
}

/// Runs `test` on a runtime of its own in a thread of its own, in a new network
/// namespace: the namespace is the thread's, and goes with it (and with the sockets
/// made in it).
pub(crate) fn in_own_netns<F: Future<Output = ()>>(test: impl FnOnce() -> F + Send + 'static) {
    let thread = std::thread::spawn(move || {
        unshare(CloneFlags::CLONE_NEWNET).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(test());
    });
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn link_and_address_changes_wake_the_subscriber() {
    if !root() {
        return;
    }
    in_own_netns(|| async {
        let mut changes = RouteChanges::subscribe().unwrap();
        ip(&["link", "add", "op-nl0", "type", "veth", "peer", "name", "op-nl1"]);
        assert!(next_change(&mut changes, "a link was added").await > 0);
        ip(&["link", "set", "op-nl1", "up"]);
        ip(&["link", "set", "op-nl0", "up"]);
        assert!(next_change(&mut changes, "the links went up").await > 0);
        ip(&["address", "add", "198.18.0.1/30", "dev", "op-nl0"]);
        assert!(next_change(&mut changes, "an address was added").await > 0);
        ip(&["link", "set", "op-nl0", "down"]);
        assert!(next_change(&mut changes, "a link went down").await > 0);
    });
}
