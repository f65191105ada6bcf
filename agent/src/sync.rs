//! Sync to the API server, while it is reachable (SEMANTICS.md O3, R1–R5): the Node and
//! its status, the node Lease, pod status, mirror pods and Events.
//!
//! Every writer goes through one [`ApiClient`], whose answers (and the API source's
//! watch) keep one [`Connectivity`](crate::apiserver::Connectivity) flag. While the API
//! server is unreachable the writers send nothing: they keep the latest state of each
//! object (coalesced) and send it once the flag turns back, paced by the client's token
//! bucket and backing off on errors (honouring `Retry-After`), so that a fleet coming
//! back online does not storm its API server. While it is unreachable, a network change
//! the kernel reports makes the probes (the lease, the API source's watch) try at once
//! ([`network`]).
//!
//! The client, the flag, the mirror view and the Events recorder are
//! [`crate::apiserver`]'s: what the writers send is recorded there by the tasks below
//! them, which never import this module.

pub mod beat;
pub mod events;
pub mod lease;
pub mod metrics;
pub mod mirror;
pub mod node;
pub mod pod_status;
pub mod start;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{Instrument, info_span};

use crate::apiserver::{ApiClient, MirrorView, Recorder, StatusBacklog, network};
use crate::podconfig::SnapshotHandle;
use crate::status::StatusStore;

/// The Node object's identity once it is registered (mirror pods' ownerReference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub name: String,
    pub uid: String,
}

/// What the sync tasks share.
#[derive(Debug, Clone)]
pub struct Context {
    pub client: ApiClient,
    pub node_name: String,
    /// The merged desired pods (static and API) and their sources.
    pub snapshot: SnapshotHandle,
    /// The runtime's status of every pod it runs, by UID.
    pub statuses: StatusStore,
    pub mirrors: MirrorView,
    /// Set by the node task once the Node is registered.
    pub node: watch::Sender<Option<NodeRef>>,
    pub events: Recorder,
    pub node_config: node::Config,
    /// Set by the pod status task after each pass.
    pub status_backlog: watch::Sender<StatusBacklog>,
    /// The node Lease's duration (`nodeLeaseDurationSeconds`).
    pub lease_duration_seconds: i32,
}

impl Context {
    /// Resolves with the Node's identity once it is registered.
    pub async fn registered_node(&self) -> NodeRef {
        let mut rx = self.node.subscribe();
        loop {
            if let Some(node) = rx.borrow_and_update().clone() {
                return node;
            }
            if rx.changed().await.is_err() {
                // The sender lives in self: not reached while self is alive.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The sync's handle: what the rest of the agent may ask of it.
#[derive(Debug, Clone)]
pub struct Handle {
    context: Arc<Context>,
}

impl Handle {
    /// Waits until every pod status update has been sent, for at most `limit` (a node
    /// shutdown's last reports). Returns false if some were left unsent: the API server
    /// is unreachable (then at once: they wait for the next agent) or did not take them
    /// in time.
    pub async fn flush(&self, limit: Duration) -> bool {
        let version = self.context.statuses.version();
        let mut backlog = self.context.status_backlog.subscribe();
        let connectivity = self.context.client.connectivity().clone();
        let flushed = async {
            tokio::select! {
                // Every status published so far taken in, and nothing left to send.
                // The sender lives in the context: it cannot close while we wait.
                done = backlog.wait_for(|b| b.version >= version && b.queued == 0) => done.is_ok(),
                () = connectivity.wait_unreachable() => false,
            }
        };
        tokio::time::timeout(limit, flushed).await.unwrap_or(false)
    }
}

impl Handle {
    /// Waits until the API server has the Node not Ready for a node shutdown, for at most
    /// `limit` (J3: before logind's lock is released). False if it did not get there: the
    /// server is unreachable (then at once) or slow.
    pub async fn node_shutdown_reported(&self, limit: Duration) -> bool {
        let mut reported = self.context.node_config.shutdown_reported.subscribe();
        let connectivity = self.context.client.connectivity().clone();
        let waited = async {
            tokio::select! {
                done = reported.wait_for(|reported| *reported) => done.is_ok(),
                () = connectivity.wait_unreachable() => false,
            }
        };
        tokio::time::timeout(limit, waited).await.unwrap_or(false)
    }
}

/// Sleeps until `at`, or forever without one (a disabled `select!` arm's wait).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// The sync, built: its handle, and its task, which runs the writers (lease, node
/// status, pod statuses, mirror pods, events, network changes) until it is dropped.
pub fn build(context: Context) -> (Handle, impl Future<Output = ()> + Send + 'static) {
    let context = Arc::new(context);
    let writers = context.clone();
    let task = async move {
        let mut tasks = tokio::task::JoinSet::new();
        let node = writers.node_name.clone();
        // The lease's renewals and the node's readings share a wakeup every 10 s.
        let beats = watch::Sender::new(0);
        let (node_beats, lease_beats) = (beats.subscribe(), beats.subscribe());
        tasks.spawn(beat::run(beats).instrument(info_span!("writers_beat", %node)));
        tasks.spawn(
            node::run(writers.clone(), node_beats).instrument(info_span!("node_status", %node)),
        );
        tasks.spawn(
            lease::run(writers.clone(), lease_beats).instrument(info_span!("node_lease", %node)),
        );
        tasks.spawn(pod_status::run(writers.clone()).instrument(info_span!("pod_status", %node)));
        tasks.spawn(mirror::run(writers.clone()).instrument(info_span!("mirror_pods", %node)));
        tasks.spawn(events::run(writers.clone()).instrument(info_span!("events", %node)));
        let connectivity = writers.client.connectivity().clone();
        tasks.spawn(network::run(connectivity).instrument(info_span!("network_changes", %node)));
        // The writers run until the agent stops them: this task is dropped, and with
        // it the set, which aborts them.
        while tasks.join_next().await.is_some() {}
    };
    (Handle { context }, task)
}
