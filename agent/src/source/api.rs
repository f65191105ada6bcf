//! The API server source: pods bound to this node (`spec.nodeName=<node>`), by list and
//! watch, checkpointed so they come back after a reboot with no network
//! (SEMANTICS.md O1, O2, O4; R6).
//!
//! The list and watch are the agent's [`watcher`]: list (paged), then watch from the
//! list's resourceVersion with bookmarks, resume from the last seen resourceVersion after
//! a broken stream, re-list on `410 Gone`, jittered exponential backoff between failures.
//! Its events drive the [`reflector`]'s state machine: the checkpoint first (O2), then
//! every list is one SET (M6: pods deleted upstream while the node was offline stop now,
//! O4, and not before); watch events are upserts (ADD/UPDATE/DELETE) and REMOVEs; a
//! bookmark or a watch established again after a failure tells the merge the source is
//! live. Before anything is sent to the merge, the source's current set is checkpointed
//! (O1) when its desired content changed; status-only changes don't rewrite it.

mod reflector;
mod strict;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use outpost_core::backoff::Backoff;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{Instrument, info_span};

use crate::apiserver::watcher::{self, ListWatch, MIN_WATCH_TIMEOUT_SECS, watcher};
use crate::apiserver::{ApiClient, Connectivity, MirrorView, Pacer};
use crate::checkpoint::{self, Checkpoints};
use crate::source::EventStream;

use self::strict::{ApiPod, StrictPods};

/// Name of this source's checkpoint file.
const CHECKPOINT: &str = "api";
/// Page size of a list, as client-go's reflector.
const PAGE: u32 = 500;
/// Watch events taken in one batch (one checkpoint write at most per batch).
const BATCH: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the API server {server}: {source}")]
    Watch {
        server: String,
        #[source]
        source: watcher::Error,
    },
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
    api: Api<ApiPod>,
    server: String,
    node_name: String,
    checkpoints: Checkpoints,
    connectivity: Connectivity,
    pacer: Pacer,
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
            pacer: config.client.pacer(),
            mirrors: config.mirrors,
        }
    }

    /// Starts the list+watch task; its events come out of the returned stream.
    pub fn into_stream(self) -> EventStream {
        let pods = StrictPods(self.api.clone());
        self.stream_of(pods)
    }

    /// [`ApiSource::into_stream`] with the list and watch calls of `lw`.
    fn stream_of(self, lw: impl ListWatch<Pod>) -> EventStream {
        let config = watcher::Config {
            field_selector: Some(format!("spec.nodeName={}", self.node_name)),
            page_size: Some(PAGE),
            watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
            backoff: Backoff::WATCH,
            pacer: Some(self.pacer.clone()),
        };
        let events = watcher(lw, config, self.connectivity.clone());
        let (tx, rx) = mpsc::channel(16);
        let span =
            info_span!("source", source = "api", server = %self.server, node = %self.node_name);
        tokio::spawn(reflector::run(self, events, tx).instrument(span));
        Box::pin(futures::stream::unfold(rx, |mut rx| async move { Some((rx.recv().await?, rx)) }))
    }
}

#[cfg(test)]
mod tests;
