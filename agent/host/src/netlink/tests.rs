//! Against the real kernel, in a network namespace of the test's own.

use super::RouteChanges;
use super::testing::{PATIENCE, in_own_netns, ip, root};

async fn next_change(changes: &mut RouteChanges, what: &str) -> usize {
    match tokio::time::timeout(PATIENCE, changes.changed()).await {
        Ok(read) => read.unwrap(),
        Err(_) => panic!("no message from the kernel after {what}"),
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
