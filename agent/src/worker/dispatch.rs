//! The dispatcher: the merge's batches to the pod workers, one per full name (started as a
//! name is first desired, ended when nothing of it is left); containerd's resubscriptions,
//! the objects' changes and the evictions to the workers concerned; at start, what an
//! earlier run left, grouped by pod for adoption; once every source has been seen, the
//! orphans (M9).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use outpost_core::merge::{DeltaOp, PodDelta};
use outpost_core::node_shutdown;
use outpost_core::pod::{FullName, Source};
use outpost_core::pod_worker::{Desired, Found};
use outpost_core::resize::PendingReason;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use self::admit::Admission;
use super::pod_runtime::PodRuntime;
use super::{Evictions, Inbox, Message, Outbox, Shared, pod};
use crate::objects;
use crate::podconfig::Batch;
use crate::runtime::events::TaskEvent;

/// The running workers, by the full name each serves, and what the merge desires.
#[derive(Debug)]
struct Workers<R: PodRuntime> {
    shared: Arc<Shared<R>>,
    outboxes: HashMap<FullName, Outbox>,
    running: JoinSet<(FullName, Inbox)>,
    /// What an earlier run left, by full name, until a worker takes it.
    found: HashMap<FullName, Vec<Found>>,
    /// The UID desired under each full name.
    desired: HashMap<FullName, String>,
    /// The priority of the pod desired under each full name (a node shutdown's groups: J3).
    priorities: HashMap<FullName, i32>,
    /// Every source has been seen (M9) and the orphans were removed.
    synced: bool,
    /// The node's admission of new pods (K4).
    admission: Admission,
    /// K6: the pods (by UID) whose resize waits for room, as last desired.
    deferred: HashMap<String, PodDelta>,
    /// X4: the static pods as the merge last desired them, for the ephemeral containers
    /// `outpost debug` adds.
    statics: HashMap<FullName, PodDelta>,
}

/// Runs the workers until `batches` closes (the agent leaves; pods keep running), or
/// until `shutdown` is cancelled: then every pod is stopped as for a node shutdown, and
/// this returns once all are stopped. Either way every worker has ended, its background
/// work done, when this returns. API pods claim the objects they refer to as they come
/// and release them as they go; `changes` of those objects go to the pods' workers, and
/// so do the eviction manager's `evictions`.
pub async fn run<R: PodRuntime>(
    shared: Arc<Shared<R>>,
    mut batches: mpsc::Receiver<Batch>,
    mut changes: objects::Changes,
    mut evictions: Evictions,
    shutdown: CancellationToken,
) {
    // Exits go straight to their workers; only a resubscription, which concerns every
    // worker, comes through here.
    let (resync_tx, mut resyncs) = mpsc::unbounded_channel();
    let watcher = watch_events(&shared, resync_tx);
    // The kernel's view (eBPF, when loaded) of the same containers: whichever reports an
    // exit first wins, the other finds the container no longer running.
    let routes = shared.routes.clone();
    let kernel = shared.ebpf.watch(move |observed| routes.kernel(observed));
    let found = adoptable(&shared.runtime).await;
    let mut workers = Workers::new(shared.clone(), found);
    let node_shutdown = loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { break false };
                workers.apply(batch).await;
            }
            Some(()) = resyncs.recv() => resync(&shared, &workers.outboxes),
            Some(name) = changes.recv() => workers.send(name, Message::ObjectsChanged),
            Some(eviction) = evictions.recv() => {
                workers.send(eviction.pod.clone(), Message::Evict(Box::new(eviction)));
            }
            () = shutdown.cancelled() => {
                tracing::info!(pods = workers.outboxes.len(), "node shutdown: stopping every pod");
                break true;
            }
            Some(done) = workers.running.join_next() => workers.finished(done),
            debugged = shared.debug.added() => workers.debugged(debugged),
        }
    };
    workers.end(node_shutdown, &mut resyncs).await;
    watcher.abort();
    if let Some(kernel) = kernel {
        kernel.abort();
    }
}

/// containerd's task events, as the runtime watches them: exits and OOM kills straight to
/// their workers' routes, resubscriptions to `resyncs`.
fn watch_events<R: PodRuntime>(
    shared: &Arc<Shared<R>>,
    resyncs: mpsc::UnboundedSender<()>,
) -> tokio::task::JoinHandle<()> {
    let routes = shared.routes.clone();
    let deliver = move |event: TaskEvent| match event {
        TaskEvent::Resync => resyncs.send(()).is_ok(),
        event => {
            routes.task(event);
            true
        }
    };
    let shared = shared.clone();
    let watch = async move { shared.runtime.watch_events(deliver).await };
    tokio::spawn(watch.instrument(tracing::info_span!("task_events")))
}

impl<R: PodRuntime> Workers<R> {
    fn new(shared: Arc<Shared<R>>, found: HashMap<FullName, Vec<Found>>) -> Workers<R> {
        let admission = Admission::new(shared.node.clone(), shared.devices.clone());
        Workers {
            shared,
            outboxes: HashMap::new(),
            running: JoinSet::new(),
            found,
            desired: HashMap::new(),
            priorities: HashMap::new(),
            synced: false,
            admission,
            deferred: HashMap::new(),
            statics: HashMap::new(),
        }
    }

    /// The merge's `batch`: each delta to the worker of its full name; after the first
    /// batch once every source has been seen, the orphans go (M9).
    async fn apply(&mut self, batch: Batch) {
        self.admit(&batch.deltas, batch.synced || self.synced).await;
        for delta in batch.deltas {
            let name = FullName::of(&delta.pod);
            let pod = self.desire(delta);
            self.send(name, Message::Desired(pod));
        }
        self.retry_deferred();
        if batch.synced && !self.synced {
            self.synced = true;
            self.remove_orphans().await;
        }
    }

    /// What `delta` leaves desired under its full name (`None`: nothing). API pods claim
    /// the objects they refer to, static pods the Services of their variables (K1); a pod
    /// no longer desired, or replaced, releases its own.
    fn desire(&mut self, mut delta: PodDelta) -> Option<Box<Desired>> {
        let objects = &self.shared.objects;
        let name = FullName::of(&delta.pod);
        if delta.op == DeltaOp::Remove {
            self.priorities.remove(&name);
            self.statics.remove(&name);
            if let Some(uid) = self.desired.remove(&name) {
                objects.release(&uid);
                self.shared.debug.forget(&uid);
            }
            return None;
        }
        let uid = outpost_core::pod::uid(&delta.pod).to_owned();
        self.priorities.insert(name.clone(), outpost_core::admission::priority(&delta.pod));
        if let Some(replaced) =
            self.desired.insert(name.clone(), uid.clone()).filter(|old| *old != uid)
        {
            objects.release(&replaced);
            self.shared.debug.forget(&replaced);
        }
        if delta.source != Source::Api {
            // X4: what `outpost debug` added, kept across the source's updates.
            self.statics.insert(name, delta.clone());
            delta.pod = self.shared.debug.applied(delta.pod);
        }
        if delta.source == Source::Api {
            objects.claim(&delta.pod);
        } else {
            objects.claim_services(&delta.pod);
        }
        let rejected = self.admission.rejection(&uid).cloned();
        let answers = objects.answers(&delta.pod);
        // K6: the worker runs the pod with its allocated resources.
        let (pod, resize_pending) = self.admission.allocate(&delta.pod, &self.shared.statuses);
        let deferred = resize_pending.as_ref().is_some_and(|p| p.reason == PendingReason::Deferred);
        if deferred {
            self.deferred.insert(uid, delta.clone());
        } else {
            self.deferred.remove(&uid);
        }
        Some(Box::new(Desired { source: delta.source, pod, rejected, answers, resize_pending }))
    }

    /// X4: static pods that gained ephemeral containers run them: each is desired again
    /// as the merge last desired it, with them.
    fn debugged(&mut self, pods: Vec<FullName>) {
        for name in pods {
            let Some(delta) = self.statics.get(&name).cloned() else { continue };
            let desired = self.desire(delta);
            self.send(name, Message::Desired(desired));
        }
    }

    /// K6: resizes deferred for want of room are tried again once a batch has changed
    /// what the other pods hold (kubelet retries pending resizes as pods go).
    fn retry_deferred(&mut self) {
        let deferred: Vec<PodDelta> = self.deferred.values().cloned().collect();
        for delta in deferred {
            let uid = outpost_core::pod::uid(&delta.pod);
            let name = FullName::of(&delta.pod);
            if self.desired.get(&name).is_none_or(|desired| desired != uid) {
                self.deferred.remove(uid);
                continue;
            }
            let desired = self.desire(delta);
            if desired.as_ref().is_some_and(|d| d.resize_pending.is_none()) {
                self.send(name, Message::Desired(desired));
            }
        }
    }

    /// K4: the pods `deltas` remove or replace leave the node's admission; the new ones
    /// are admitted ([`admit`]), and the pods preempted for critical ones told so.
    async fn admit(&mut self, deltas: &[PodDelta], synced: bool) {
        for delta in deltas {
            let uid = outpost_core::pod::uid(&delta.pod);
            let name = FullName::of(&delta.pod);
            let gone =
                self.desired.get(&name).filter(|old| delta.op == DeltaOp::Remove || *old != uid);
            if let Some(old) = gone {
                self.admission.forget(old);
            }
        }
        let found = &self.found;
        let adopted = |name: &FullName, uid: &str| {
            found.get(name).is_some_and(|f| f.iter().any(|c| c.pod_uid.as_deref() == Some(uid)))
        };
        let shared = &self.shared;
        let (statuses, events) = (&shared.statuses, &shared.events);
        let preempted = self.admission.batch(deltas, statuses, events, adopted, synced).await;
        // K6: adopted pods' allocation is what their containers were resized to.
        for delta in deltas {
            let uid = outpost_core::pod::uid(&delta.pod);
            let found = self.found.get(&FullName::of(&delta.pod)).into_iter().flatten();
            let allocation: std::collections::BTreeMap<_, _> = found
                .filter(|f| f.pod_uid.as_deref() == Some(uid))
                .filter_map(|f| Some((f.container.clone()?, f.resources.clone()?)))
                .collect();
            if !allocation.is_empty() {
                self.admission.restore_allocation(uid, &allocation);
            }
        }
        for (name, uid) in preempted {
            self.send(name, Message::Preempt { uid });
        }
    }

    /// M9: every source has been seen; what no desired pod owns goes: the sandboxes
    /// (namespaces, files, cgroups, network) of other pods, the containers an earlier run
    /// left for them, the objects no pod claims.
    async fn remove_orphans(&mut self) {
        let mut owned: HashSet<String> = self.desired.values().cloned().collect();
        owned.extend(self.found.values().flatten().filter_map(|c| c.pod_uid.clone()));
        self.shared.runtime.remove_orphans(&owned).await;
        self.collect_garbage();
        self.shared.objects.collect_garbage();
    }

    /// The dispatcher ends: every worker is told (`node_shutdown`: stop the pods; else
    /// leave them running) and awaited. Exits still have to reach the workers while they
    /// stop their containers, and so do resubscriptions.
    async fn end(mut self, node_shutdown: bool, resyncs: &mut mpsc::UnboundedReceiver<()>) {
        if node_shutdown && !self.shared.shutdown_groups.is_empty() {
            self.stop_by_priority(resyncs).await;
        }
        for outbox in self.outboxes.values() {
            let _ = outbox.send(if node_shutdown {
                Message::Shutdown { grace: None }
            } else {
                Message::Leave
            });
        }
        loop {
            tokio::select! {
                Some(()) = resyncs.recv() => resync(&self.shared, &self.outboxes),
                done = self.running.join_next() => {
                    let Some(done) = done else { break };
                    if let Ok((name, _)) = done {
                        self.outboxes.remove(&name);
                    }
                }
            }
        }
        if node_shutdown {
            tracing::info!("node shutdown: every pod is stopped");
        }
    }

    /// J3: a node shutdown with priority groups, as kubelet's: the pods of the lowest
    /// group first, each within the shorter of its own grace period and its group's; the
    /// next group once they all stopped or the group's grace period is over.
    async fn stop_by_priority(&mut self, resyncs: &mut mpsc::UnboundedReceiver<()>) {
        let priorities = &self.priorities;
        let pods = self.outboxes.keys().map(|name| {
            let priority = priorities.get(name).copied();
            (name.clone(), priority.unwrap_or(node_shutdown::DEFAULT_PRIORITY))
        });
        let stages = node_shutdown::plan(&self.shared.shutdown_groups, pods);
        for stage in stages {
            tracing::info!(
                priority = stage.priority,
                grace = ?stage.grace,
                pods = stage.pods.len(),
                "node shutdown: stopping a priority group"
            );
            let mut left: HashSet<FullName> = HashSet::new();
            for name in stage.pods {
                if let Some(outbox) = self.outboxes.get(&name)
                    && outbox.send(Message::Shutdown { grace: Some(stage.grace) }).is_ok()
                {
                    left.insert(name);
                }
            }
            let over = tokio::time::sleep(stage.grace);
            tokio::pin!(over);
            while !left.is_empty() {
                tokio::select! {
                    () = &mut over => {
                        tracing::warn!(
                            priority = stage.priority,
                            pods = left.len(),
                            "node shutdown: the group's grace period is over with pods still \
                             stopping; the next group starts"
                        );
                        break;
                    }
                    Some(()) = resyncs.recv() => resync(&self.shared, &self.outboxes),
                    done = self.running.join_next() => {
                        let Some(done) = done else { break };
                        if let Ok((name, _)) = done {
                            left.remove(&name);
                            self.outboxes.remove(&name);
                        }
                    }
                }
            }
            tracing::info!(priority = stage.priority, "node shutdown: priority group stopped");
        }
    }

    fn send(&mut self, name: FullName, message: Message) {
        if let Some(outbox) = self.outboxes.get(&name) {
            match outbox.send(message) {
                Ok(()) => return,
                Err(mpsc::error::SendError(message)) => {
                    self.outboxes.remove(&name);
                    return self.send(name, message);
                }
            }
        }
        if matches!(
            message,
            Message::Task(_)
                | Message::Kernel(_)
                | Message::ObjectsChanged
                | Message::Evict(_)
                | Message::Preempt { .. }
                | Message::Leave
        ) {
            return;
        }
        let (outbox, inbox) = mpsc::unbounded_channel();
        let _ = outbox.send(message);
        let found = self.found.remove(&name).unwrap_or_default();
        let worker = pod::PodWorker::new(self.shared.clone(), name.clone(), outbox.clone(), found);
        self.outboxes.insert(name.clone(), outbox);
        self.running.spawn(async move {
            let inbox = worker.run(inbox).await;
            (name, inbox)
        });
    }

    /// A worker ended: messages sent to it while it was finishing go to a new one.
    fn finished(&mut self, done: Result<(FullName, Inbox), tokio::task::JoinError>) {
        let Ok((name, mut inbox)) = done else { return };
        self.outboxes.remove(&name);
        let mut pending = Vec::new();
        while let Ok(message) = inbox.try_recv() {
            pending.push(message);
        }
        for message in pending {
            self.send(name.clone(), message);
        }
    }

    /// M9: once every source has been seen, containers of pods no longer desired get a
    /// worker with nothing desired, which stops and removes them and their sandbox.
    fn collect_garbage(&mut self) {
        let leftovers: Vec<FullName> = self.found.keys().cloned().collect();
        for name in leftovers {
            tracing::info!(
                pod.namespace = %name.namespace,
                pod.name = %name.name,
                "stopping containers of a pod that is no longer desired (M9)"
            );
            self.send(name, Message::Desired(None));
        }
    }
}

/// containerd's event stream was subscribed again: containerd may have restarted and lost
/// track of shims, and exits may have been missed; every worker looks at its tasks once.
fn resync<R>(runtime: &Shared<R>, workers: &HashMap<FullName, Outbox>) {
    runtime.gc.containerd_reconnected();
    for outbox in workers.values() {
        let _ = outbox.send(Message::Task(Box::new(TaskEvent::Resync)));
    }
}

/// Outpost's containers from before this start, by pod full name.
async fn adoptable<R: PodRuntime>(runtime: &R) -> HashMap<FullName, Vec<Found>> {
    let listed = match runtime.list().await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %crate::error_chain::describe(&e), "cannot list containers to adopt");
            return HashMap::new();
        }
    };
    let mut by_pod: HashMap<FullName, Vec<Found>> = HashMap::new();
    for (name, found) in listed {
        by_pod.entry(name).or_default().push(found);
    }
    if !by_pod.is_empty() {
        tracing::info!(pods = by_pod.len(), "found containers of an earlier run to adopt");
    }
    by_pod
}

mod admit;
#[cfg(test)]
mod tests;
