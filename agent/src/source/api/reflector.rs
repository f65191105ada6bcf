//! The list+watch loop of the API server source (see the parent module for the contract).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, WatchEvent, WatchParams};
use outpost_core::backoff::Backoff;
use outpost_core::pod::{self, CONFIG_MIRROR, Source, SourcePod};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{ApiSource, BATCH, CHECKPOINT, Checkpoint, Error, PAGE, WATCH_TIMEOUT_SECS};
use crate::apiserver::{Wakeups, Woken};
use crate::source::{Freshness, Op, SourceEvent, SourceUpdate};

/// Why a watch ended.
enum WatchEnd {
    /// The server closed it (timeout) or it broke: watch again from the last version.
    Resume,
    /// The version is too old (410): list again.
    Relist,
    /// The merge is gone: stop.
    Closed,
}

pub(super) struct Reflector {
    source: ApiSource,
    tx: mpsc::Sender<SourceEvent>,
    selector: String,
    /// The current pods by UID, as the merge has them.
    pods: BTreeMap<Arc<str>, SourcePod>,
    /// Digest of (UID, desired content) of what the checkpoint holds.
    checkpointed: Option<u128>,
    backoff: Backoff,
    /// What cuts the backoff short: a network change, the server found back.
    wakeups: Wakeups,
    /// A failure was reported and nothing has confirmed the connection since.
    failing: bool,
}

impl Reflector {
    pub(super) fn new(source: ApiSource, tx: mpsc::Sender<SourceEvent>) -> Reflector {
        let selector = format!("spec.nodeName={}", source.node_name);
        let wakeups = source.connectivity.wakeups();
        Reflector {
            source,
            tx,
            selector,
            pods: BTreeMap::new(),
            checkpointed: None,
            backoff: Backoff::WATCH,
            wakeups,
            failing: false,
        }
    }

    pub(super) async fn run(mut self) {
        if !self.replay_checkpoint().await {
            return;
        }
        loop {
            let version = match self.list().await {
                Ok(Some(version)) => version,
                Ok(None) => return,
                Err(e) => {
                    if !self.failed(e).await {
                        return;
                    }
                    continue;
                }
            };
            if !self.watch_from(version).await {
                return;
            }
        }
    }

    /// O2: the checkpoint, if there is one for this server and node, as a SET.
    async fn replay_checkpoint(&mut self) -> bool {
        let checkpoints = self.source.checkpoints.clone();
        let read = tokio::task::spawn_blocking(move || checkpoints.read::<Checkpoint>(CHECKPOINT))
            .await
            .unwrap_or(Ok(None));
        let saved = match read {
            Ok(Some(saved)) => saved,
            Ok(None) => return true,
            Err(e) => {
                warn!(error = %e, "ignoring the API pods' checkpoint; the next list from the API server replaces it");
                return self.send(SourceEvent::Failed(Box::new(Error::Checkpoint(e)))).await;
            }
        };
        if saved.server != self.source.server || saved.node_name != self.source.node_name {
            warn!(
                checkpoint_server = %saved.server, checkpoint_node = %saved.node_name,
                "the API pods' checkpoint is of another server or node; not replaying it"
            );
            return true;
        }
        let pods: Vec<SourcePod> = saved.pods.into_iter().map(SourcePod::new).collect();
        info!(pods = pods.len(), "replaying the API pods' checkpoint until the API server answers");
        self.pods = pods.iter().map(|p| (p.uid.clone(), p.clone())).collect();
        self.checkpointed = Some(self.digest());
        let update = SourceUpdate { source: Source::Api, op: Op::Set, pods };
        self.send(SourceEvent::Update(update, Freshness::Checkpoint)).await
    }

    /// Lists every page, checkpoints, sends the SET. Returns the list's resourceVersion
    /// (`None` when the merge is gone).
    async fn list(&mut self) -> Result<Option<String>, Error> {
        let mut params = ListParams::default().fields(&self.selector).limit(PAGE);
        let mut items = Vec::new();
        let version = loop {
            let page = self.source.api.list(&params).await.map_err(|source| Error::List {
                node: self.source.node_name.clone(),
                server: self.source.server.clone(),
                source,
            })?;
            items.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break page.metadata.resource_version.unwrap_or_default(),
            }
        };
        self.backoff.reset();
        self.failing = false;
        self.source.connectivity.reachable();
        let (mirrors, pods): (Vec<Pod>, Vec<Pod>) = items.into_iter().partition(is_mirror);
        self.source.mirrors.listed(mirrors.into_iter().map(Arc::new));
        let pods: Vec<SourcePod> = pods.into_iter().map(SourcePod::new).collect();
        debug!(pods = pods.len(), version, "listed");
        self.pods = pods.iter().map(|p| (p.uid.clone(), p.clone())).collect();
        self.checkpoint().await;
        let update = SourceUpdate { source: Source::Api, op: Op::Set, pods };
        Ok(self.send(SourceEvent::Update(update, Freshness::Live)).await.then_some(version))
    }

    /// Watches from `version` until a re-list is needed. Returns false when the merge is gone.
    async fn watch_from(&mut self, mut version: String) -> bool {
        let params = WatchParams::default().fields(&self.selector).timeout(WATCH_TIMEOUT_SECS);
        loop {
            let stream = match self.source.api.watch(&params, &version).await {
                Ok(stream) => stream,
                Err(kube::Error::Api(status)) if status.code == 410 => return true,
                Err(source) => {
                    let error = Error::Watch {
                        node: self.source.node_name.clone(),
                        server: self.source.server.clone(),
                        source,
                    };
                    if !self.failed(error).await {
                        return false;
                    }
                    continue;
                }
            };
            if !self.connected().await {
                return false;
            }
            let mut stream = std::pin::pin!(stream);
            match self.follow(&mut stream, &mut version).await {
                WatchEnd::Resume => {}
                WatchEnd::Relist => return true,
                WatchEnd::Closed => return false,
            }
        }
    }

    /// Takes a watch stream's events in batches until it ends.
    async fn follow<S>(&mut self, stream: &mut S, version: &mut String) -> WatchEnd
    where
        S: futures::Stream<Item = Result<WatchEvent<Pod>, kube::Error>> + Unpin,
    {
        loop {
            let Some(first) = stream.next().await else { return WatchEnd::Resume };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match stream.next().now_or_never() {
                    Some(Some(item)) => batch.push(item),
                    _ => break,
                }
            }
            let mut events = Vec::with_capacity(batch.len());
            let mut end = None;
            for item in batch {
                end = self.take(item, version, &mut events);
                if end.is_some() {
                    break;
                }
            }
            self.checkpoint().await;
            for event in events {
                if !self.send(event).await {
                    return WatchEnd::Closed;
                }
            }
            if let Some(end) = end {
                if self.failing {
                    let delay = self.backoff.next_delay(fastrand::f64());
                    self.wakeups.pause(delay).await;
                }
                return end;
            }
        }
    }

    /// Applies one watch event to the current set, adding what the merge must hear to
    /// `events`; returns how the watch ends, if this event ends it.
    fn take(
        &mut self,
        item: Result<WatchEvent<Pod>, kube::Error>,
        version: &mut String,
        events: &mut Vec<SourceEvent>,
    ) -> Option<WatchEnd> {
        let failure = match item {
            Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => {
                remember(version, &pod);
                events.extend(self.upsert(pod));
                return None;
            }
            Ok(WatchEvent::Deleted(pod)) => {
                remember(version, &pod);
                if is_mirror(&pod) {
                    self.source.mirrors.deleted(&pod);
                }
                events.extend(self.remove(&pod));
                return None;
            }
            Ok(WatchEvent::Bookmark(mark)) => {
                self.source.connectivity.reachable();
                *version = mark.metadata.resource_version;
                events.push(SourceEvent::Confirmed);
                return None;
            }
            Ok(WatchEvent::Error(status)) if status.code == 410 => {
                debug!(message = %status.message, "watch expired; listing again");
                return Some(WatchEnd::Relist);
            }
            Ok(WatchEvent::Error(status)) => Error::WatchStatus {
                server: self.source.server.clone(),
                code: status.code,
                message: status.message.clone(),
            },
            Err(source) => {
                // The stream broke: the server (or the way to it) went away.
                self.source.connectivity.unreachable(&source.to_string());
                Error::Watch {
                    node: self.source.node_name.clone(),
                    server: self.source.server.clone(),
                    source,
                }
            }
        };
        events.push(SourceEvent::Failed(Box::new(failure)));
        self.failing = true;
        Some(WatchEnd::Resume)
    }

    fn upsert(&mut self, pod: Pod) -> Option<SourceEvent> {
        if is_mirror(&pod) {
            // R6: mirror pods are the agent's own reflection of static pods; the mirror
            // sync keeps them, the merge never sees them.
            self.source.mirrors.upserted(&Arc::new(pod));
            return None;
        }
        let op = if pod.metadata.deletion_timestamp.is_some() { Op::Delete } else { Op::Update };
        let pod = SourcePod::new(pod);
        self.pods.insert(pod.uid.clone(), pod.clone());
        let update = SourceUpdate { source: Source::Api, op, pods: vec![pod] };
        Some(SourceEvent::Update(update, Freshness::Live))
    }

    fn remove(&mut self, pod: &Pod) -> Option<SourceEvent> {
        let removed = self.pods.remove(pod::uid(pod))?;
        let update = SourceUpdate { source: Source::Api, op: Op::Remove, pods: vec![removed] };
        Some(SourceEvent::Update(update, Freshness::Live))
    }

    /// O1: writes the current set if its desired content changed since the last write.
    /// A failed write is reported but does not hold the pods back: they are what the
    /// API server asked for; only their survival across a reboot is at risk.
    async fn checkpoint(&mut self) {
        let digest = self.digest();
        if self.checkpointed == Some(digest) {
            return;
        }
        let saved = Checkpoint {
            server: self.source.server.clone(),
            node_name: self.source.node_name.clone(),
            pods: self.pods.values().map(|p| p.pod.clone()).collect(),
        };
        match self.source.checkpoints.write_async(CHECKPOINT, saved).await {
            Ok(()) => self.checkpointed = Some(digest),
            Err(e) => {
                warn!(error = %e, "cannot checkpoint the API pods; they will not survive a reboot without network");
                let _ = self.tx.send(SourceEvent::Failed(Box::new(Error::Checkpoint(e)))).await;
            }
        }
    }

    /// A digest of what a restart would need: each pod's UID and desired content.
    fn digest(&self) -> u128 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for (uid, pod) in &self.pods {
            hasher.update(uid.as_bytes());
            hasher.update(&pod.fingerprint.semantic.to_le_bytes());
        }
        hasher.digest128()
    }

    /// A watch is established: if a failure was reported, the source is live again.
    async fn connected(&mut self) -> bool {
        self.backoff.reset();
        self.source.connectivity.reachable();
        if std::mem::take(&mut self.failing) {
            info!("watching the API server again");
            return self.send(SourceEvent::Confirmed).await;
        }
        true
    }

    /// Reports a failure and waits out the backoff (or less: a network change, the
    /// server found back by another request). Returns false when the merge is gone.
    async fn failed(&mut self, error: Error) -> bool {
        self.failing = true;
        if let Error::List { source, .. } | Error::Watch { source, .. } = &error
            && !matches!(source, kube::Error::Api(_))
        {
            self.source.connectivity.unreachable(&source.to_string());
        }
        let delay = self.backoff.next_delay(fastrand::f64());
        debug!(error = %error, retry_in = ?delay, "API server request failed");
        if !self.send(SourceEvent::Failed(Box::new(error))).await {
            return false;
        }
        let woken = self.wakeups.pause(delay).await;
        if woken != Woken::Backoff {
            debug!(?woken, "retrying before the backoff's end");
        }
        true
    }

    async fn send(&self, event: SourceEvent) -> bool {
        self.tx.send(event).await.is_ok()
    }
}

fn is_mirror(pod: &Pod) -> bool {
    pod::annotation(pod, CONFIG_MIRROR).is_some()
}

fn remember(version: &mut String, pod: &Pod) {
    if let Some(v) = &pod.metadata.resource_version {
        version.clone_from(v);
    }
}
