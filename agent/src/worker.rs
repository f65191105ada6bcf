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

mod pod;
mod sandbox;
mod start;
pub mod state;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use oci_spec::runtime::Capability;
use outpost_core::lifecycle::CrashLoopConfig;
use outpost_core::merge::DeltaOp;
use outpost_core::pod::{FullName, Source};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::ebpf;
use crate::metrics::counted::Metrics;
use crate::podconfig::Batch;
use crate::runtime::Containerd;
use crate::runtime::cni::Cni;
use crate::runtime::container::{self, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, Listed};
use crate::runtime::events::{self, TaskEvent};
use crate::runtime::image::credentials::Keyring;
use crate::runtime::image::pull::PullOptions;
use crate::status::StatusStore;
use crate::sync::Recorder;

/// What the runtime is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node_name: String,
    /// The node's address (status.hostIP, and hostNetwork pods' IP).
    pub host_ip: Option<IpAddr>,
    /// `--state-dir`: pods' files and volumes go to `<state-dir>/pods/<uid>`.
    pub state_dir: PathBuf,
    /// Pods' namespaces go to `<run-dir>/pods/<uid>` (gone after a reboot, as they are).
    pub run_dir: PathBuf,
    /// `/var/log/pods`.
    pub pod_log_dir: PathBuf,
    /// This binary, run by containerd's shims as the container logger.
    pub exe: PathBuf,
    /// The resolv.conf pods with dnsPolicy Default (or ClusterFirst, without cluster DNS) get.
    pub host_resolv_conf: PathBuf,
    pub crash_loop: CrashLoopConfig,
    pub keyring: Keyring,
    pub pull: PullOptions,
    pub host_capabilities: Vec<Capability>,
}

/// What every worker shares.
#[derive(Debug)]
pub struct Runtime {
    pub containerd: Containerd,
    pub cni: Cni,
    pub settings: Settings,
    pub statuses: StatusStore,
    /// Where the workers' Events go (Pulled, Created, Started, Killing, BackOff, …).
    pub events: Recorder,
    /// Counts restarts, pod start latencies and image pulls.
    pub metrics: Metrics,
    /// The BPF side (when loaded): kernel events, the exec audit log.
    pub ebpf: ebpf::Handle,
    routes: Routes,
}

impl Runtime {
    pub fn new(
        containerd: Containerd,
        cni: Cni,
        settings: Settings,
        statuses: StatusStore,
        events: Recorder,
        metrics: Metrics,
        ebpf: ebpf::Handle,
    ) -> Runtime {
        Runtime {
            containerd,
            cni,
            settings,
            statuses,
            events,
            metrics,
            ebpf,
            routes: Routes::default(),
        }
    }

    /// `<state-dir>/pods`: each pod's files and volumes, by UID.
    pub fn pods_dir(&self) -> PathBuf {
        self.settings.state_dir.join("pods")
    }

    /// `<run-dir>/pods`: each pod's namespaces, by UID.
    pub fn run_pods_dir(&self) -> PathBuf {
        self.settings.run_dir.join("pods")
    }
}

/// A worker's inbox.
#[derive(Debug)]
enum Message {
    /// The desired pod of this full name and its source (`None`: no longer desired).
    Desired(Option<(Source, Arc<Pod>)>),
    Task(TaskEvent),
    /// What the kernel saw in one of the pod's containers (eBPF).
    Kernel(ebpf::Observed),
    /// The node shuts down (`--stop-pods-on-shutdown`): stop the pod's containers
    /// gracefully, report it terminated, and end.
    Shutdown,
}

type Inbox = mpsc::UnboundedReceiver<Message>;
type Outbox = mpsc::UnboundedSender<Message>;

/// Which worker a container's task events go to.
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
}

/// Runs the workers until `batches` closes, or until `shutdown` is cancelled: then every
/// pod is stopped as for a node shutdown, and this returns once all are stopped.
pub async fn run(
    runtime: Arc<Runtime>,
    mut batches: mpsc::Receiver<Batch>,
    shutdown: CancellationToken,
) {
    let (events_tx, mut events_rx) = mpsc::channel(256);
    let watcher = tokio::spawn(events::watch(runtime.containerd.clone(), events_tx));
    // The kernel's view (eBPF, when loaded) of the same containers: whichever reports an
    // exit first wins, the other finds the container no longer running.
    let mut kernel = runtime.ebpf.events();
    let mut adopted = adoptable(&runtime).await;
    let mut workers: HashMap<FullName, Outbox> = HashMap::new();
    let mut desired: HashMap<FullName, String> = HashMap::new();
    let mut running: JoinSet<(FullName, Inbox)> = JoinSet::new();
    let mut collected = false;
    loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { break };
                for delta in batch.deltas {
                    let name = FullName::of(&delta.pod);
                    let pod = match delta.op {
                        DeltaOp::Remove => {
                            desired.remove(&name);
                            None
                        }
                        _ => {
                            desired.insert(name.clone(), outpost_core::pod::uid(&delta.pod).to_owned());
                            Some((delta.source, delta.pod))
                        }
                    };
                    send(&runtime, &mut workers, &mut running, &mut adopted, name, Message::Desired(pod));
                }
                if batch.synced && !collected {
                    collected = true;
                    let mut owned: HashSet<String> = desired.values().cloned().collect();
                    owned.extend(adopted.values().flatten().filter_map(|c| c.label(LABEL_POD_UID).map(str::to_owned)));
                    sandbox::remove_orphans(&runtime, &owned).await;
                    collect_garbage(&runtime, &mut workers, &mut running, &mut adopted);
                }
            }
            Some(event) = events_rx.recv() => route(&runtime, &workers, event),
            Some(observed) = next_kernel_event(&mut kernel) => route_kernel(&runtime, observed),
            () = shutdown.cancelled() => {
                tracing::info!(pods = workers.len(), "node shutdown: stopping every pod");
                for outbox in workers.values() {
                    let _ = outbox.send(Message::Shutdown);
                }
                // Exits still have to reach the workers while they stop their containers.
                loop {
                    tokio::select! {
                        Some(event) = events_rx.recv() => route(&runtime, &workers, event),
                        Some(observed) = next_kernel_event(&mut kernel) => route_kernel(&runtime, observed),
                        done = running.join_next() => {
                            let Some(done) = done else { break };
                            if let Ok((name, _)) = done {
                                workers.remove(&name);
                            }
                        }
                    }
                }
                tracing::info!("node shutdown: every pod is stopped");
                break;
            }
            Some(done) = running.join_next() => {
                let Ok((name, mut inbox)) = done else { continue };
                workers.remove(&name);
                // Messages sent while the worker was finishing: a new worker takes them.
                let mut pending = Vec::new();
                while let Ok(message) = inbox.try_recv() {
                    pending.push(message);
                }
                for message in pending {
                    send(&runtime, &mut workers, &mut running, &mut adopted, name.clone(), message);
                }
            }
        }
    }
    watcher.abort();
}

fn send(
    runtime: &Arc<Runtime>,
    workers: &mut HashMap<FullName, Outbox>,
    running: &mut JoinSet<(FullName, Inbox)>,
    adopted: &mut HashMap<FullName, Vec<Listed>>,
    name: FullName,
    message: Message,
) {
    if let Some(outbox) = workers.get(&name) {
        match outbox.send(message) {
            Ok(()) => return,
            Err(mpsc::error::SendError(message)) => {
                workers.remove(&name);
                return send(runtime, workers, running, adopted, name, message);
            }
        }
    }
    if matches!(message, Message::Task(_) | Message::Kernel(_)) {
        return;
    }
    let (outbox, inbox) = mpsc::unbounded_channel();
    let _ = outbox.send(message);
    let containers = adopted.remove(&name).unwrap_or_default();
    let worker = pod::PodWorker::new(runtime.clone(), name.clone(), outbox.clone(), containers);
    workers.insert(name.clone(), outbox);
    running.spawn(async move {
        let inbox = worker.run(inbox).await;
        (name, inbox)
    });
}

fn route(runtime: &Runtime, workers: &HashMap<FullName, Outbox>, event: TaskEvent) {
    match event.container_id() {
        Some(id) => {
            if let Some(outbox) = runtime.routes.get(id) {
                let _ = outbox.send(Message::Task(event));
            }
        }
        None => {
            for outbox in workers.values() {
                let _ = outbox.send(Message::Task(event.clone()));
            }
        }
    }
}

/// The next kernel event, or never when BPF is not loaded.
async fn next_kernel_event(
    kernel: &mut Option<mpsc::Receiver<ebpf::Observed>>,
) -> Option<ebpf::Observed> {
    match kernel {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// To the worker whose container it happened in (others' containers are not ours).
fn route_kernel(runtime: &Runtime, observed: ebpf::Observed) {
    if let Some(outbox) = runtime.routes.get(&observed.container_id) {
        let _ = outbox.send(Message::Kernel(observed));
    }
}

/// Outpost's containers from before this start, by pod full name.
async fn adoptable(runtime: &Runtime) -> HashMap<FullName, Vec<Listed>> {
    let listed = match container::list(&runtime.containerd).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %crate::error_chain::describe(&e), "cannot list containers to adopt");
            return HashMap::new();
        }
    };
    let mut by_pod: HashMap<FullName, Vec<Listed>> = HashMap::new();
    for c in listed {
        let (Some(namespace), Some(name)) = (c.label(LABEL_POD_NAMESPACE), c.label(LABEL_POD_NAME))
        else {
            continue;
        };
        let full_name = FullName { namespace: namespace.to_owned(), name: name.to_owned() };
        by_pod.entry(full_name).or_default().push(c);
    }
    if !by_pod.is_empty() {
        tracing::info!(pods = by_pod.len(), "found containers of an earlier run to adopt");
    }
    by_pod
}

/// M9: once every source has been seen, containers of pods no longer desired get a worker
/// with nothing desired, which stops and removes them and their sandbox.
fn collect_garbage(
    runtime: &Arc<Runtime>,
    workers: &mut HashMap<FullName, Outbox>,
    running: &mut JoinSet<(FullName, Inbox)>,
    adopted: &mut HashMap<FullName, Vec<Listed>>,
) {
    let leftovers: Vec<FullName> = adopted.keys().cloned().collect();
    for name in leftovers {
        tracing::info!(pod = %name, "stopping containers of a pod that is no longer desired (M9)");
        send(runtime, workers, running, adopted, name, Message::Desired(None));
    }
}
