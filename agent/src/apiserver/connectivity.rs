//! Whether the API server answers, and what wakes the requests that wait for it.
//!
//! Every request the agent makes to the API server sets the flag (the writers' through
//! [`ApiClient`](super::ApiClient), the API source's list and watch); writers wait on it
//! instead of retrying into a dead network. The request that finds out whether the
//! server is back (the lease's renewal: the probe) retries on a jittered backoff of
//! 1 to 10 s, the watches on their own only every 30 to 60 s (when there is no Lease,
//! the watches are the probes, on their own backoff), and [`Wakeups`]
//! cuts that wait short when there is reason to believe the server may answer now: the
//! kernel reported a network change ([`super::network`]), or another request found the
//! server back. The backoff stays the floor for outages the kernel does not see (a
//! server that restarts).
//!
//! A server that answers may still refuse every write for a while (a 403 storm while the
//! Node authorizer's graph lags or RBAC changes, 429 from API Priority and Fairness, 503
//! during an upgrade). Each writer backs off on its own; the first write accepted after
//! such refusals ([`Connectivity::writes_accepted`]) tells the others that the storm is
//! over, so that what waited goes at once instead of at each writer's next retry (O3).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::info;

/// The server found back: the how-many-th time, and how long it had been away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Counts the times the server was found (the first answer after the start is 1).
    pub count: u64,
    /// How long it was unreachable before (from the start, for the first).
    pub away: Duration,
}

/// The shared flag; cloning shares it.
#[derive(Debug, Clone)]
pub struct Connectivity {
    reachable: Arc<watch::Sender<bool>>,
    /// Since when the server is unreachable (the start, at first), and the last time it
    /// was found back.
    outage: Arc<Mutex<(Instant, Reconnect)>>,
    /// Whether a dedicated probe (the node Lease's renewal) looks for the server while
    /// it is unreachable; without one (an agent that only reads its pods from the API
    /// server) the watches are the probes.
    probed: Arc<AtomicBool>,
    /// Counts the network changes the kernel reported while the server was unreachable
    /// (after the debounce: one per change, not per message).
    network: Arc<watch::Sender<u64>>,
    /// Whether the last write answered was refused by a storm's kind of answer.
    writes_refused: Arc<AtomicBool>,
    /// Counts the writes accepted right after refusals: each is a storm's end.
    writes_back: Arc<watch::Sender<u64>>,
}

impl Default for Connectivity {
    fn default() -> Connectivity {
        Connectivity {
            reachable: Arc::new(watch::Sender::new(false)),
            outage: Arc::new(Mutex::new((
                Instant::now(),
                Reconnect { count: 0, away: Duration::ZERO },
            ))),
            probed: Arc::new(AtomicBool::new(false)),
            network: Arc::new(watch::Sender::new(0)),
            writes_refused: Arc::new(AtomicBool::new(false)),
            writes_back: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Connectivity {
    /// A write was answered with `status`: a refusal that any write may meet (403, 429,
    /// 5xx) marks the writes refused; a success after such refusals ends that and tells
    /// [`Connectivity::writes_accepted`]'s subscribers. Answers about one object (404,
    /// 409, 422) say nothing of the others' writes.
    pub fn write_answered(&self, status: http::StatusCode) {
        if status.is_success() {
            if self.writes_refused.swap(false, Ordering::Relaxed) {
                info!("the API server takes writes again; sending what waited");
                self.writes_back.send_modify(|count| *count = count.wrapping_add(1));
            }
        } else if refuses_every_write(status) {
            self.writes_refused.store(true, Ordering::Relaxed);
        }
    }

    /// Changes when a write is accepted after refusals (the end of a storm of them).
    pub fn writes_accepted(&self) -> watch::Receiver<u64> {
        self.writes_back.subscribe()
    }

    /// A request was answered (any HTTP response: the server is there).
    pub fn reachable(&self) {
        if self.is_reachable() {
            return;
        }
        // The outage is noted before the flag turns, so that whoever wakes on the turn
        // reads this reconnect's; under the lock, so that it is noted once.
        let mut outage = super::lock(&self.outage);
        if self.is_reachable() {
            return;
        }
        let (since, last) = &mut *outage;
        *last = Reconnect { count: last.count + 1, away: since.elapsed() };
        if self.reachable.send_if_modified(|up| !std::mem::replace(up, true)) {
            info!(away = ?last.away, "the API server is reachable");
        }
    }

    /// A request could not reach the server (connect error, timeout, broken stream).
    pub fn unreachable(&self, error: &str) {
        let mut outage = super::lock(&self.outage);
        if self.reachable.send_if_modified(|up| std::mem::replace(up, false)) {
            outage.0 = Instant::now();
            info!(error, "the API server is unreachable; status is kept until it is back");
        }
    }

    /// A dedicated probe runs from now on (the node Lease's renewal).
    pub fn set_probed(&self) {
        self.probed.store(true, Ordering::Relaxed);
    }

    /// Whether a dedicated probe looks for the server while it is unreachable.
    pub fn is_probed(&self) -> bool {
        self.probed.load(Ordering::Relaxed)
    }

    /// The last time the server was found back, and how long it had been away.
    pub fn last_reconnect(&self) -> Reconnect {
        super::lock(&self.outage).1
    }

    pub fn is_reachable(&self) -> bool {
        *self.reachable.borrow()
    }

    /// Resolves once the server is (or becomes) reachable.
    pub async fn wait_reachable(&self) {
        let mut rx = self.reachable.subscribe();
        // The sender lives in self, so this cannot fail while we wait.
        let _ = rx.wait_for(|up| *up).await;
    }

    /// Resolves once the server is (or becomes) unreachable.
    pub async fn wait_unreachable(&self) {
        let mut rx = self.reachable.subscribe();
        let _ = rx.wait_for(|up| !*up).await;
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.reachable.subscribe()
    }

    /// The kernel reported a network change while the server was unreachable: every
    /// waiting probe tries at once.
    pub fn network_changed(&self) {
        self.network.send_modify(|changes| *changes = changes.wrapping_add(1));
    }

    /// What cuts a probe's backoff short, from now on.
    pub fn wakeups(&self) -> Wakeups {
        Wakeups { reachable: self.reachable.subscribe(), network: self.network.subscribe() }
    }
}

/// Why a probe's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// Its backoff delay passed.
    Backoff,
    /// The kernel reported a network change.
    Network,
    /// Another request found the server back.
    Reconnected,
}

/// One probe's view of what should make it try again before its backoff passed. A
/// network change that came while the probe was busy (its request in flight) wakes its
/// next wait at once: the request may have failed just before the network came back.
#[derive(Debug)]
pub struct Wakeups {
    reachable: watch::Receiver<bool>,
    network: watch::Receiver<u64>,
}

impl Wakeups {
    /// Waits `delay`, or less if woken first.
    pub async fn pause(&mut self, delay: Duration) -> Woken {
        tokio::select! {
            () = tokio::time::sleep(delay) => Woken::Backoff,
            woken = self.woken(true) => woken,
        }
    }

    /// Resolves when the server turns reachable after being unreachable (at the call or
    /// later), or, with `network`, on the next network change the kernel reports (at
    /// once if one came since the last wakeup). A server that is reachable at the call,
    /// answering errors, does not wake the probe: its backoff holds.
    pub async fn woken(&mut self, network: bool) -> Woken {
        tokio::select! {
            () = network_changed(&mut self.network), if network => Woken::Network,
            () = reconnected(&mut self.reachable) => Woken::Reconnected,
        }
    }
}

async fn network_changed(network: &mut watch::Receiver<u64>) {
    if network.changed().await.is_err() {
        // The sender lives in the Connectivity, gone with the agent.
        std::future::pending::<()>().await;
    }
}

async fn reconnected(reachable: &mut watch::Receiver<bool>) {
    let mut was_down = !*reachable.borrow_and_update();
    loop {
        if reachable.changed().await.is_err() {
            return std::future::pending().await;
        }
        let up = *reachable.borrow_and_update();
        if up && was_down {
            return;
        }
        was_down |= !up;
    }
}

/// An answer a storm gives every write alike: the authorizer's 403, flow control's 429,
/// a server error or an unavailable server.
fn refuses_every_write(status: http::StatusCode) -> bool {
    status == http::StatusCode::FORBIDDEN
        || status == http::StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connectivity_wakes_waiters_on_each_turn() {
        let connectivity = Connectivity::default();
        assert!(!connectivity.is_reachable(), "unknown counts as unreachable");
        let waiter = tokio::spawn({
            let c = connectivity.clone();
            async move { c.wait_reachable().await }
        });
        connectivity.reachable();
        waiter.await.unwrap_or_default();
        assert!(connectivity.is_reachable());
        connectivity.unreachable("connection refused");
        assert!(!connectivity.is_reachable());
        connectivity.wait_unreachable().await;
    }

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn o3_a_write_accepted_after_a_storms_refusals_ends_it_once() {
        use http::StatusCode;
        let connectivity = Connectivity::default();
        let accepted = connectivity.writes_accepted();
        connectivity.write_answered(StatusCode::OK);
        assert!(!accepted.has_changed().unwrap_or_default(), "no refusal before: no storm ended");
        for refusal in [
            StatusCode::FORBIDDEN,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::INTERNAL_SERVER_ERROR,
        ] {
            connectivity.write_answered(refusal);
            connectivity.write_answered(StatusCode::CREATED);
            connectivity.write_answered(StatusCode::OK);
        }
        assert_eq!(*accepted.borrow(), 4, "each storm's end once, not each success after it");
        // One object's trouble is no storm.
        for own in [StatusCode::NOT_FOUND, StatusCode::CONFLICT, StatusCode::UNPROCESSABLE_ENTITY] {
            connectivity.write_answered(own);
            connectivity.write_answered(StatusCode::OK);
        }
        assert_eq!(*accepted.borrow(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn each_reconnect_is_counted_with_how_long_the_server_was_away() {
        let connectivity = Connectivity::default();
        assert_eq!(connectivity.last_reconnect(), Reconnect { count: 0, away: Duration::ZERO });
        tokio::time::sleep(Duration::from_secs(2)).await;
        connectivity.reachable();
        let first = Reconnect { count: 1, away: Duration::from_secs(2) };
        assert_eq!(connectivity.last_reconnect(), first, "away since the start");
        tokio::time::sleep(LONG).await;
        connectivity.reachable();
        assert_eq!(connectivity.last_reconnect(), first, "answers while reachable change nothing");
        connectivity.unreachable("refused");
        tokio::time::sleep(Duration::from_secs(90)).await;
        connectivity.unreachable("refused again");
        connectivity.reachable();
        let second = Reconnect { count: 2, away: Duration::from_secs(90) };
        assert_eq!(connectivity.last_reconnect(), second, "from the first failure");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_probe_goes_at_once_on_a_network_change() {
        let connectivity = Connectivity::default();
        let mut wakeups = connectivity.wakeups();
        let probe = tokio::spawn(async move { wakeups.pause(LONG).await });
        tokio::task::yield_now().await;
        connectivity.network_changed();
        assert_eq!(probe.await.ok(), Some(Woken::Network));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_probe_goes_at_once_when_the_server_is_found_back() {
        let connectivity = Connectivity::default();
        let mut wakeups = connectivity.wakeups();
        let probe = tokio::spawn(async move { wakeups.pause(LONG).await });
        tokio::task::yield_now().await;
        connectivity.unreachable("refused");
        connectivity.reachable();
        assert_eq!(probe.await.ok(), Some(Woken::Reconnected));
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_during_the_request_wakes_the_next_wait_once() {
        let connectivity = Connectivity::default();
        let mut wakeups = connectivity.wakeups();
        // While the probe's request was in flight.
        connectivity.network_changed();
        connectivity.network_changed();
        assert_eq!(wakeups.pause(LONG).await, Woken::Network, "not lost");
        // Seen: the next wait is the backoff's (the paused clock jumps to it).
        assert_eq!(wakeups.pause(LONG).await, Woken::Backoff);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_stays_reachable_does_not_cut_the_backoff() {
        let connectivity = Connectivity::default();
        connectivity.reachable();
        let mut wakeups = connectivity.wakeups();
        // Answers (errors, say) keep it reachable: no turn, no wakeup.
        connectivity.reachable();
        assert_eq!(wakeups.pause(LONG).await, Woken::Backoff);
        // A turn to unreachable alone does not wake it either.
        connectivity.unreachable("refused");
        assert_eq!(wakeups.pause(LONG).await, Woken::Backoff);
    }
}
