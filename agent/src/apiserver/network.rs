//! Network changes → reconnect probes. While the API server is unreachable, a change the
//! kernel reports (a link up, an address or a route added: the uplink coming back)
//! makes every waiting probe try at once ([`Connectivity::network_changed`]), instead of
//! at the end of its backoff (up to 10 s for the lease, 30 s for the watches).
//!
//! A burst of messages makes one round ([`outpost_core::debounce`]: 100 ms quiet, at
//! most 1 s, rounds 1 s apart, up to 200 ms of jitter). The subscription is held only
//! while the server is unreachable: a reachable server needs no such news, and a host
//! whose pods come and go (veths, bridge ports, routes) would wake the agent for each.
//! Without netlink (a sandbox that forbids it) this is said once and the probes keep
//! their backoff.

#[cfg(test)]
mod tests;

use std::time::Duration;

use outpost_core::debounce::{Debounce, Settings};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::Connectivity;
use crate::host::netlink::RouteChanges;

/// Follows the kernel's network changes for `connectivity`'s probes, while the server
/// is unreachable, until aborted.
pub async fn run(connectivity: Connectivity) {
    let mut warned = false;
    loop {
        connectivity.wait_unreachable().await;
        match RouteChanges::subscribe() {
            Ok(changes) => follow(changes, &connectivity).await,
            Err(e) => {
                if !std::mem::replace(&mut warned, true) {
                    warn!(
                        error = %e,
                        "the API server's return is noticed on the reconnect backoff alone (up to 10 s)"
                    );
                }
                connectivity.wait_reachable().await;
            }
        }
    }
}

/// Until the server is reachable again (the subscription is then dropped).
async fn follow(mut changes: RouteChanges, connectivity: &Connectivity) {
    let origin = Instant::now();
    let mut debounce = Debounce::new(Settings::NETWORK);
    loop {
        let due = debounce.due();
        tokio::select! {
            () = connectivity.wait_reachable() => return,
            read = changes.changed() => match read {
                Ok(messages) => {
                    debug!(messages, "network change while the API server is unreachable");
                    debounce.message(origin.elapsed(), fastrand::f64());
                }
                Err(e) => {
                    warn!(
                        error = %e,
                        "stopped following the kernel's network changes until the API server is back; its return is noticed on the reconnect backoff"
                    );
                    connectivity.wait_reachable().await;
                    return;
                }
            },
            () = sleep_until(origin, due), if due.is_some() => {
                if debounce.round(origin.elapsed()) {
                    debug!("the network changed; probing the API server now");
                    connectivity.network_changed();
                }
            }
        }
    }
}

async fn sleep_until(origin: Instant, at: Option<Duration>) {
    if let Some(at) = at {
        tokio::time::sleep_until(origin + at).await;
    }
}
