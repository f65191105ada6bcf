//! The API server source: pods bound to this node (`spec.nodeName=<node>`), by list and
//! watch through kube-rs, checkpointed so they come back after a reboot with no network
//! (SEMANTICS.md O1, O2, O4; R6).
//!
//! The list+watch loop is written here over kube's `Api::list`/`Api::watch` rather than
//! taken from `kube::runtime::watcher`, because the watcher hides what this source must
//! report: when a watch is (re)established and when a bookmark arrives, which is how the
//! agent knows the API server is reachable again (`/readyz`, and the sync of issue 5).
//! It follows the reflector's contract: list (paged), then watch from the list's
//! resourceVersion with bookmarks, resume from the last seen resourceVersion after a
//! broken stream, re-list on `410 Gone`, jittered exponential backoff between failures.
//!
//! Every list is one SET (M6: pods deleted upstream while the node was offline stop now,
//! O4, and not before); watch events are upserts (ADD/UPDATE/DELETE) and REMOVEs. Before
//! anything is sent to the merge, the source's current set is checkpointed (O1) when its
//! desired content changed; status-only changes don't rewrite it.

mod reflector;

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{Instrument, info_span};

use self::reflector::Reflector;
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
    #[error("kubeconfig {path}: {source}; check the file given with --kubeconfig")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    #[error("cannot build the API server client from {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: kube::Error,
    },
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
    pub kubeconfig: PathBuf,
    pub node_name: String,
    pub checkpoints: Checkpoints,
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
}

impl ApiSource {
    /// Reads the kubeconfig and builds the client. Makes no request: the API server may
    /// well be unreachable at start.
    pub async fn new(config: Config) -> Result<ApiSource, Error> {
        let path = config.kubeconfig;
        let kubeconfig = Kubeconfig::read_from(&path)
            .map_err(|source| Error::Kubeconfig { path: path.clone(), source })?;
        let client_config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig { path: path.clone(), source })?;
        let server = client_config.cluster_url.to_string();
        let client = kube::Client::try_from(client_config)
            .map_err(|source| Error::Client { path: path.clone(), source })?;
        Ok(ApiSource {
            api: Api::all(client),
            server,
            node_name: config.node_name,
            checkpoints: config.checkpoints,
        })
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
