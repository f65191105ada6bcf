//! The API source's state machine over the watcher's events (see the parent module for
//! the contract), and the task that drives it: the checkpoint first, then the events in
//! batches, each checkpointed before what it tells the merge is sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod::{self, CONFIG_MIRROR, Source, SourcePod};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{ApiSource, BATCH, CHECKPOINT, Checkpoint, Error};
use crate::apiserver::MirrorView;
use crate::apiserver::watcher::Event;
use crate::checkpoint::{self, Checkpoints};
use crate::source::{Freshness, Op, SourceEvent, SourceUpdate};

/// Runs the source until the merge is gone: the checkpoint (O2), then the watcher's
/// `events`, up to [`BATCH`] of those ready at once per checkpoint write (O1), which
/// comes before what they tell the merge is sent.
pub(super) async fn run(
    source: ApiSource,
    events: impl Stream<Item = Event<Pod>>,
    tx: mpsc::Sender<SourceEvent>,
) {
    let mut reflector = Reflector::new(source);
    let checkpoints = reflector.checkpoints.clone();
    let read = tokio::task::spawn_blocking(move || checkpoints.read::<Checkpoint>(CHECKPOINT))
        .await
        .unwrap_or(Ok(None));
    if let Some(event) = reflector.replay(read)
        && tx.send(event).await.is_err()
    {
        return;
    }
    let mut events = std::pin::pin!(events);
    while let Some(first) = events.next().await {
        let mut out = Vec::new();
        reflector.step(first, &mut out);
        for _ in 1..BATCH {
            let Some(Some(event)) = events.next().now_or_never() else { break };
            reflector.step(event, &mut out);
        }
        if let Err(e) = reflector.checkpoint().await {
            warn!(error = %e, "cannot checkpoint the API pods; they will not survive a reboot without network");
            out.insert(0, SourceEvent::Failed(Box::new(Error::Checkpoint(e))));
        }
        for event in out {
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }
}

/// Where the source stands in the watcher's protocol.
#[derive(Debug)]
enum State {
    /// Between lists: the set is the last list's (or the checkpoint's) with the watch
    /// events since.
    Current,
    /// A list is under way: its pods so far, which replace the set at its end.
    Listing(Vec<Pod>),
}

#[derive(Debug)]
struct Reflector {
    state: State,
    server: String,
    node_name: String,
    checkpoints: Checkpoints,
    mirrors: MirrorView,
    /// The current pods by UID, as the merge has them.
    pods: BTreeMap<Arc<str>, SourcePod>,
    /// Digest of (UID, desired content) of what the checkpoint holds.
    checkpointed: Option<u128>,
}

impl Reflector {
    fn new(source: ApiSource) -> Reflector {
        Reflector {
            state: State::Current,
            server: source.server,
            node_name: source.node_name,
            checkpoints: source.checkpoints,
            mirrors: source.mirrors,
            pods: BTreeMap::new(),
            checkpointed: None,
        }
    }

    /// O2: what the checkpoint read at start tells the merge: its pods as a SET, if it
    /// is of this server and node.
    fn replay(
        &mut self,
        read: Result<Option<Checkpoint>, checkpoint::Error>,
    ) -> Option<SourceEvent> {
        let saved = match read {
            Ok(saved) => saved?,
            Err(e) => {
                warn!(error = %e, "ignoring the API pods' checkpoint; the next list from the API server replaces it");
                return Some(SourceEvent::Failed(Box::new(Error::Checkpoint(e))));
            }
        };
        if saved.server != self.server || saved.node_name != self.node_name {
            warn!(
                checkpoint_server = %saved.server, checkpoint_node = %saved.node_name,
                "the API pods' checkpoint is of another server or node; not replaying it"
            );
            return None;
        }
        let pods: Vec<SourcePod> = saved.pods.into_iter().map(SourcePod::new).collect();
        info!(pods = pods.len(), "replaying the API pods' checkpoint until the API server answers");
        self.pods = pods.iter().map(|p| (p.uid.clone(), p.clone())).collect();
        self.checkpointed = Some(self.digest());
        let update = SourceUpdate { source: Source::Api, op: Op::Set, pods };
        Some(SourceEvent::Update(update, Freshness::Checkpoint))
    }

    /// Takes one event of the watcher, adding what the merge must hear to `out`.
    fn step(&mut self, event: Event<Pod>, out: &mut Vec<SourceEvent>) {
        let state = std::mem::replace(&mut self.state, State::Current);
        self.state = match (state, event) {
            (_, Event::Init) => State::Listing(Vec::new()),
            (State::Listing(mut listed), Event::InitApply(pod)) => {
                listed.push(pod);
                State::Listing(listed)
            }
            (State::Listing(listed), Event::InitDone) => {
                out.push(self.listed(listed));
                State::Current
            }
            (State::Current, Event::InitApply(_) | Event::InitDone) => {
                debug!("a list's event with no list begun; ignored");
                State::Current
            }
            (state, Event::Apply(pod)) => {
                out.extend(self.upsert(pod));
                state
            }
            (state, Event::Delete(pod)) => {
                if is_mirror(&pod) {
                    self.mirrors.deleted(&pod);
                }
                out.extend(self.remove(&pod));
                state
            }
            (state, Event::Bookmark) => {
                out.push(SourceEvent::Confirmed);
                state
            }
            (state, Event::Recovered) => {
                info!("watching the API server again");
                out.push(SourceEvent::Confirmed);
                state
            }
            // A list that failed midway is dropped: the next one begins with `Init`.
            (_, Event::Failed(source)) => {
                let error = Error::Watch { server: self.server.clone(), source };
                out.push(SourceEvent::Failed(Box::new(error)));
                State::Current
            }
        };
    }

    /// A list is complete: its pods replace the set (M6), its mirror pods the mirror
    /// view (R6).
    fn listed(&mut self, listed: Vec<Pod>) -> SourceEvent {
        let (mirrors, pods): (Vec<Pod>, Vec<Pod>) = listed.into_iter().partition(is_mirror);
        self.mirrors.listed(mirrors.into_iter().map(Arc::new));
        let pods: Vec<SourcePod> = pods.into_iter().map(SourcePod::new).collect();
        debug!(pods = pods.len(), "listed");
        self.pods = pods.iter().map(|p| (p.uid.clone(), p.clone())).collect();
        let update = SourceUpdate { source: Source::Api, op: Op::Set, pods };
        SourceEvent::Update(update, Freshness::Live)
    }

    fn upsert(&mut self, pod: Pod) -> Option<SourceEvent> {
        if is_mirror(&pod) {
            // R6: mirror pods are the agent's own reflection of static pods; the mirror
            // sync keeps them, the merge never sees them.
            self.mirrors.upserted(&Arc::new(pod));
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
    /// A failed write does not hold the pods back: they are what the API server asked
    /// for; only their survival across a reboot is at risk (the next batch tries again).
    async fn checkpoint(&mut self) -> Result<(), checkpoint::Error> {
        let digest = self.digest();
        if self.checkpointed == Some(digest) {
            return Ok(());
        }
        let saved = Checkpoint {
            server: self.server.clone(),
            node_name: self.node_name.clone(),
            pods: self.pods.values().map(|p| p.pod.clone()).collect(),
        };
        self.checkpoints.write_async(CHECKPOINT, saved).await?;
        self.checkpointed = Some(digest);
        Ok(())
    }

    /// A digest of what a restart would need: each pod's UID, desired content, and
    /// whether it is finished (a pod the server has as Failed or Succeeded, rejected by
    /// the node's admission among them, is replayed so and never runs again: kubelet
    /// reads the phase from the API server).
    fn digest(&self) -> u128 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for (uid, pod) in &self.pods {
            hasher.update(uid.as_bytes());
            hasher.update(&pod.fingerprint.semantic.to_le_bytes());
            hasher.update(&[u8::from(is_finished(&pod.pod))]);
        }
        hasher.digest128()
    }
}

fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn is_mirror(pod: &Pod) -> bool {
    pod::annotation(pod, CONFIG_MIRROR).is_some()
}
