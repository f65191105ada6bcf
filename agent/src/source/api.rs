//! The API server source: pods bound to this node (`spec.nodeName=<node>`), by list and
//! watch through kube-rs, checkpointed so they come back after a reboot with no network
//! (SEMANTICS.md O1, O2, O4; R6).
//!
//! The list+watch loop is written here over kube's `Api::list`/`Api::watch` rather than
//! taken from `kube::runtime::watcher`, because the watcher hides what this source must
//! report: when a watch is (re)established and when a bookmark arrives, which is how the
//! agent knows the API server is reachable again (`/readyz`, and the status sync).
//! It follows the reflector's contract: list (paged), then watch from the list's
//! resourceVersion with bookmarks, resume from the last seen resourceVersion after a
//! broken stream, re-list on `410 Gone`, jittered exponential backoff between failures.
//!
//! Every list is one SET (M6: pods deleted upstream while the node was offline stop now,
//! O4, and not before); watch events are upserts (ADD/UPDATE/DELETE) and REMOVEs. Before
//! anything is sent to the merge, the source's current set is checkpointed (O1) when its
//! desired content changed; status-only changes don't rewrite it.

mod reflector;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{Instrument, info_span};

use self::reflector::Reflector;
use crate::apiserver::{ApiClient, Connectivity, MirrorView};
use crate::checkpoint::{self, Checkpoints};
use crate::source::EventStream;

/// Name of this source's checkpoint file.
const CHECKPOINT: &str = "api";
/// Page size of a list, as client-go's reflector.
const PAGE: u32 = 500;
/// Server-side watch timeout; kube-rs's client reads for 295 s, so stay under it.
const WATCH_TIMEOUT_SECS: u32 = 290;
/// Watch events taken in one batch (one checkpoint write at most per batch).
const BATCH: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing pods of node {node} from {server}: {source}")]
    List {
        node: String,
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("watching pods of node {node} on {server}: {source}")]
    Watch {
        node: String,
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("the watch of pods on {server} failed: {message} (code {code})")]
    WatchStatus { server: String, code: u16, message: String },
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::Error),
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The client shared with the sync tasks: the list and watch report whether the API
    /// server is reachable through its connectivity flag.
    pub client: ApiClient,
    pub node_name: String,
    pub checkpoints: Checkpoints,
    /// Where mirror pods go instead of the merge (R6).
    pub mirrors: MirrorView,
}

/// The pods of the last list and the watch events since, as written to disk (O1).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    /// The API server these pods came from; a checkpoint of another one is not replayed.
    server: String,
    node_name: String,
    pods: Vec<Arc<Pod>>,
}

#[derive(Debug)]
pub struct ApiSource {
    api: Api<Pod>,
    server: String,
    node_name: String,
    checkpoints: Checkpoints,
    connectivity: Connectivity,
    mirrors: MirrorView,
}

impl ApiSource {
    /// Makes no request: the API server may well be unreachable at start.
    pub fn new(config: Config) -> ApiSource {
        ApiSource {
            api: Api::all(config.client.kube().clone()),
            server: config.client.server().to_owned(),
            node_name: config.node_name,
            checkpoints: config.checkpoints,
            connectivity: config.client.connectivity().clone(),
            mirrors: config.mirrors,
        }
    }

    /// Starts the list+watch task; its events come out of the returned stream.
    pub fn into_stream(self) -> EventStream {
        let (tx, rx) = mpsc::channel(16);
        let span =
            info_span!("source", source = "api", server = %self.server, node = %self.node_name);
        tokio::spawn(Reflector::new(self, tx).run().instrument(span));
        Box::pin(futures::stream::unfold(rx, |mut rx| async move { Some((rx.recv().await?, rx)) }))
    }
}
