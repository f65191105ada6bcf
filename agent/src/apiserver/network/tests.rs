//! The whole way from the kernel to a waiting probe, in a network namespace of the
//! test's own (`outpost_host::netlink::testing`).

use super::*;
use crate::apiserver::Woken;
use crate::host::netlink::testing::{PATIENCE, in_own_netns, ip, root};

#[test]
fn a_link_coming_up_wakes_a_waiting_probe_until_the_server_is_back() {
    if !root() {
        return;
    }
    in_own_netns(|| async {
        ip(&["link", "add", "op-up0", "type", "veth", "peer", "name", "op-up1"]);
        ip(&["link", "set", "op-up1", "up"]);
        // The server is unreachable (unknown counts as unreachable) and a probe waits.
        let connectivity = Connectivity::default();
        let mut probe = connectivity.wakeups();
        let changes = RouteChanges::subscribe().unwrap();
        let follower = tokio::spawn({
            let connectivity = connectivity.clone();
            async move { follow(changes, &connectivity).await }
        });
        ip(&["link", "set", "op-up0", "up"]);
        ip(&["address", "add", "198.18.0.1/30", "dev", "op-up0"]);
        let woken = tokio::time::timeout(PATIENCE, probe.woken(true)).await;
        assert_eq!(woken.ok(), Some(Woken::Network), "the probe was not woken");
        // The server is back: the subscription goes (a reachable server needs no news).
        connectivity.reachable();
        let ended = tokio::time::timeout(PATIENCE, follower).await;
        assert!(matches!(ended, Ok(Ok(()))), "still following once the server is back");
    });
}
