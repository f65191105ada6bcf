//! Pod workers: one task per pod full name (namespace/name), driven by the merge's deltas
//! and containerd's task events. A worker owns its pod's lifecycle: the sandbox
//! (namespaces, network, volumes), its containers, restarts and backoff, graceful stop,
//! and the pod's status. Because one worker serves a full name, a static pod replaced
//! under the same name is stopped before its successor starts (M10).
//!
//! At start the workers adopt what an earlier agent left running (containers carry the
//! CRI labels: pod UID, namespace, name, container, restart count, spec hash): a desired
//! pod's running containers are kept, not restarted; once every source has been seen
//! (M9), containers and sandboxes of pods no longer desired are stopped and removed.

mod containerd;
pub mod metrics;
mod pod;
mod pod_runtime;
pub mod probe;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use outpost_core::merge::DeltaOp;
use outpost_core::pod::{FullName, Source};
use outpost_core::pod_worker::{self, Desired, Found};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use self::containerd::{Pods, Settings};
pub use self::pod_runtime::PodRuntime;
use self::probe::Prober;
use crate::apiserver::Recorder;
use crate::ebpf;
use crate::gc;
use crate::objects;
use crate::podconfig::Batch;
use crate::runtime::Containerd;
use crate::runtime::cni::Cni;
use crate::runtime::events::{self, TaskEvent};
use crate::runtime::exec::Execs;
use crate::status::StatusStore;
use crate::worker::metrics::Metrics;

/// What every worker shares: the pod runtime, where statuses, Events and counts go, the
/// kernel's side, and which worker each container's events go to.
#[derive(Debug)]
pub struct Shared<R> {
    pub runtime: R,
    pub statuses: StatusStore,
    /// Where the workers' Events go (Killing, BackOff, …).
    pub events: Recorder,
    /// Counts restarts and pod start latencies.
    pub metrics: Metrics,
    /// The BPF side (when loaded): kernel events, the exec audit log.
    pub ebpf: ebpf::Handle,
    /// Runs probes' and hooks' handlers.
    pub prober: Prober,
    /// The garbage collector: told when a dead container is kept, and after a pull.
    pub gc: gc::Handle,
    settings: pod_worker::Settings,
    routes: Routes,
}

/// The workers of the agent: containerd, CNI and the host behind them.
pub type Runtime = Shared<Pods>;

impl Runtime {
    pub fn new(
        containerd: Containerd,
        cni: Cni,
        settings: Settings,
        statuses: StatusStore,
        events: Recorder,
        metrics: Metrics,
        ebpf: ebpf::Handle,
    ) -> Result<Runtime, probe::Error> {
        let core = pod_worker::Settings {
            crash_loop: settings.crash_loop,
            host_ip: settings.host_ip,
            seed: fastrand::u64(..),
            facts: settings.facts.clone(),
        };
        let execs = Execs::new(containerd.clone(), settings.run_dir.join("exec"));
        let gc = settings.gc.clone();
        let pods = Pods {
            containerd,
            cni,
            settings,
            events: events.clone(),
            metrics: metrics.clone(),
            execs,
            starts: tokio::sync::Semaphore::new(containerd::start_parallelism(
                crate::host::capacity::cpus(),
            )),
            prefetched: containerd::Prefetched::default(),
        };
        let prober = Prober::new()?;
        Ok(Shared::with_runtime(pods, core, statuses, events, metrics, ebpf, prober).with_gc(gc))
    }
}

impl<R: PodRuntime> Shared<R> {
    pub fn with_runtime(
        runtime: R,
        settings: pod_worker::Settings,
        statuses: StatusStore,
        events: Recorder,
        metrics: Metrics,
        ebpf: ebpf::Handle,
        prober: Prober,
    ) -> Shared<R> {
        Shared {
            runtime,
            statuses,
            events,
            metrics,
            ebpf,
            prober,
            gc: gc::Handle::default(),
            settings,
            routes: Routes::default(),
        }
    }

    /// Tells `gc` about kept dead containers and pulls.
    pub fn with_gc(mut self, gc: gc::Handle) -> Shared<R> {
        self.gc = gc;
        self
    }
}

/// The eviction manager's word to the workers (E2): evict pod `pod` (UID `uid`) with
/// `message`, its containers stopped within `grace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub pod: FullName,
    pub uid: String,
    pub message: String,
    pub grace: std::time::Duration,
}

/// Where evictions reach the workers.
pub type Evictions = mpsc::UnboundedReceiver<Eviction>;

/// A worker's inbox.
#[derive(Debug)]
enum Message {
    /// The desired pod of this full name (`None`: no longer desired).
    Desired(Option<Desired>),
    Task(TaskEvent),
    /// What the kernel saw in one of the pod's containers (eBPF).
    Kernel(ebpf::Observed),
    /// An API object the pod refers to changed, or its token is due (V1).
    ObjectsChanged,
    /// The eviction manager chose the pod (E2).
    Evict {
        uid: String,
        message: String,
        grace: std::time::Duration,
    },
    /// The node shuts down (`--stop-pods-on-shutdown`): stop the pod's containers
    /// gracefully, report it terminated, and end.
    Shutdown,
    /// The agent stops and leaves the pods running: finish what is under way, and end.
    Leave,
}

type Inbox = mpsc::UnboundedReceiver<Message>;
type Outbox = mpsc::UnboundedSender<Message>;

/// Which worker a container's task events go to. The event streams deliver through it
/// themselves: an exit reaches its worker without waiting on the dispatch loop, which
/// may be busy with a batch (or with removing orphans after the first sync).
#[derive(Debug, Default, Clone)]
struct Routes(Arc<Mutex<HashMap<String, Outbox>>>);

impl Routes {
    fn add(&self, container_id: &str, to: &Outbox) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(container_id.to_owned(), to.clone());
        }
    }

    fn remove(&self, container_id: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(container_id);
        }
    }

    fn get(&self, container_id: &str) -> Option<Outbox> {
        self.0.lock().ok().and_then(|map| map.get(container_id).cloned())
    }

    /// To the worker whose container it happened in (others' containers are not ours).
    fn send(&self, container_id: &str, message: Message) {
        if let Some(outbox) = self.get(container_id) {
            let _ = outbox.send(message);
        }
    }

    /// containerd's word on one container (an exit, an OOM kill).
    fn task(&self, event: TaskEvent) {
        if let Some(id) = event.container_id().map(str::to_owned) {
            self.send(&id, Message::Task(event));
        }
    }

    /// What the kernel saw in a container (eBPF).
    fn kernel(&self, observed: ebpf::Observed) {
        let id = observed.container_id.clone();
        self.send(&id, Message::Kernel(observed));
    }
}

/// The running workers, by the full name each serves.
#[derive(Debug)]
struct Workers<R: PodRuntime> {
    shared: Arc<Shared<R>>,
    outboxes: HashMap<FullName, Outbox>,
    running: JoinSet<(FullName, Inbox)>,
    /// What an earlier run left, by full name, until a worker takes it.
    found: HashMap<FullName, Vec<Found>>,
}

/// Runs the workers until `batches` closes (the agent leaves; pods keep running), or
/// until `shutdown` is cancelled: then every pod is stopped as for a node shutdown, and
/// this returns once all are stopped. Either way every worker has ended, its background
/// work done, when this returns. API pods claim the objects they refer to as they come
/// and release them as they go; `changes` of those objects go to the pods' workers, and
/// so do the eviction manager's `evictions`.
pub async fn run(
    runtime: Arc<Runtime>,
    mut batches: mpsc::Receiver<Batch>,
    mut changes: objects::Changes,
    mut evictions: Evictions,
    shutdown: CancellationToken,
) {
    let objects = runtime.runtime.settings.objects.clone();
    // Exits go straight to their workers; only a resubscription, which concerns every
    // worker, comes through here.
    let (resync_tx, mut resyncs) = mpsc::unbounded_channel();
    let routes = runtime.routes.clone();
    let watcher =
        tokio::spawn(events::watch(runtime.runtime.containerd.clone(), move |event| match event {
            TaskEvent::Resync => resync_tx.send(()).is_ok(),
            event => {
                routes.task(event);
                true
            }
        }));
    // The kernel's view (eBPF, when loaded) of the same containers: whichever reports an
    // exit first wins, the other finds the container no longer running.
    let routes = runtime.routes.clone();
    let kernel = runtime.ebpf.watch(move |observed| routes.kernel(observed));
    let mut workers = Workers {
        found: adoptable(&runtime.runtime).await,
        shared: runtime.clone(),
        outboxes: HashMap::new(),
        running: JoinSet::new(),
    };
    let mut desired: HashMap<FullName, String> = HashMap::new();
    let mut collected = false;
    let last = loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { break Message::Leave };
                for delta in batch.deltas {
                    let name = FullName::of(&delta.pod);
                    let pod = match delta.op {
                        DeltaOp::Remove => {
                            if let Some(uid) = desired.remove(&name) {
                                objects.release(&uid);
                            }
                            None
                        }
                        _ => {
                            let uid = outpost_core::pod::uid(&delta.pod).to_owned();
                            if let Some(replaced) = desired.insert(name.clone(), uid.clone()).filter(|old| *old != uid) {
                                objects.release(&replaced);
                            }
                            if delta.source == Source::Api {
                                objects.claim(&delta.pod);
                            }
                            Some(Desired { source: delta.source, pod: delta.pod })
                        }
                    };
                    workers.send(name, Message::Desired(pod));
                }
                if batch.synced && !collected {
                    collected = true;
                    let mut owned: HashSet<String> = desired.values().cloned().collect();
                    owned.extend(workers.found.values().flatten().filter_map(|c| c.pod_uid.clone()));
                    containerd::remove_orphans(&runtime.runtime, &owned).await;
                    workers.collect_garbage();
                    objects.collect_garbage();
                }
            }
            Some(()) = resyncs.recv() => resync(&runtime, &workers.outboxes),
            Some(name) = changes.recv() => workers.send(name, Message::ObjectsChanged),
            Some(Eviction { pod, uid, message, grace }) = evictions.recv() => {
                workers.send(pod, Message::Evict { uid, message, grace });
            }
            () = shutdown.cancelled() => {
                tracing::info!(pods = workers.outboxes.len(), "node shutdown: stopping every pod");
                break Message::Shutdown;
            }
            Some(done) = workers.running.join_next() => workers.finished(done),
        }
    };
    // Exits still have to reach the workers while they stop their containers.
    for outbox in workers.outboxes.values() {
        let _ = outbox.send(match last {
            Message::Shutdown => Message::Shutdown,
            _ => Message::Leave,
        });
    }
    loop {
        tokio::select! {
            Some(()) = resyncs.recv() => resync(&runtime, &workers.outboxes),
            done = workers.running.join_next() => {
                let Some(done) = done else { break };
                if let Ok((name, _)) = done {
                    workers.outboxes.remove(&name);
                }
            }
        }
    }
    if matches!(last, Message::Shutdown) {
        tracing::info!("node shutdown: every pod is stopped");
    }
    watcher.abort();
    if let Some(kernel) = kernel {
        kernel.abort();
    }
}

impl<R: PodRuntime> Workers<R> {
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
                | Message::Evict { .. }
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
            tracing::info!(pod.namespace = %name.namespace, pod.name = %name.name, "stopping containers of a pod that is no longer desired (M9)");
            self.send(name, Message::Desired(None));
        }
    }
}

/// containerd's event stream was subscribed again: containerd may have restarted and lost
/// track of shims, and exits may have been missed; every worker looks at its tasks once.
fn resync<R>(runtime: &Shared<R>, workers: &HashMap<FullName, Outbox>) {
    runtime.gc.containerd_reconnected();
    for outbox in workers.values() {
        let _ = outbox.send(Message::Task(TaskEvent::Resync));
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
