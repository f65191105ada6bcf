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
mod dispatch;
#[cfg(test)]
mod fake;
mod handlers;
#[cfg(feature = "hollow")]
pub mod hollow;
pub mod images_dir;
pub mod metrics;
mod pod;
mod pod_runtime;
pub mod probe;
pub mod start;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use outpost_core::node_shutdown::PriorityGroup;
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{self, Desired};
use tokio::sync::{mpsc, watch};

pub use self::containerd::{Pods, Settings};
pub use self::dispatch::run;
pub use self::pod_runtime::PodRuntime;
use self::probe::Prober;
use crate::apiserver::Recorder;
use crate::ebpf;
use crate::gc;
use crate::objects;
use crate::runtime::Containerd;
use crate::runtime::cni::Cni;
use crate::runtime::events::TaskEvent;
use crate::runtime::exec::Execs;
use crate::status::StatusStore;
use crate::worker::metrics::Metrics;

/// What every worker shares: the pod runtime, where statuses, Events and counts go, the
/// kernel's side, the API objects pods refer to, and which worker each container's events
/// go to.
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
    /// The API objects API pods refer to: claimed as the pods come, released as they go.
    pub objects: objects::Objects,
    /// The node as admission sees it (K4); `None`: pods are not admitted against it.
    pub node: Option<watch::Receiver<outpost_core::node_admission::Node>>,
    /// A node shutdown's priority groups (J3), sorted; empty: every pod stops at once,
    /// each within its own grace period.
    pub shutdown_groups: Vec<PriorityGroup>,
    /// D2: the device manager; `None`: no pod gets devices.
    pub devices: Option<crate::devices::Manager>,
    /// X4: the ephemeral containers `outpost debug` added to static pods.
    pub debug: crate::debug_containers::DebugContainers,
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
        let objects = settings.objects.clone();
        let host = settings.host.clone();
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
            host,
        };
        let prober = Prober::new()?;
        let shared = Shared::with_runtime(pods, core, statuses, events, metrics, ebpf, prober);
        Ok(shared.with_gc(gc).with_objects(objects))
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
            objects: objects::Objects::default(),
            node: None,
            shutdown_groups: Vec::new(),
            devices: None,
            debug: crate::debug_containers::DebugContainers::default(),
            settings,
            routes: Routes::default(),
        }
    }

    /// Tells `gc` about kept dead containers and pulls.
    pub fn with_gc(mut self, gc: gc::Handle) -> Shared<R> {
        self.gc = gc;
        self
    }

    /// Admits pods against `node` as it is published (K4).
    pub fn with_node(
        mut self,
        node: watch::Receiver<outpost_core::node_admission::Node>,
    ) -> Shared<R> {
        self.node = Some(node);
        self
    }

    /// Gives pods their devices through `devices` at admission (D2).
    /// X4: static pods run with the ephemeral containers `debug` holds for them.
    pub fn with_debug_containers(
        mut self,
        debug: crate::debug_containers::DebugContainers,
    ) -> Shared<R> {
        self.debug = debug;
        self
    }

    pub fn with_devices(mut self, devices: crate::devices::Manager) -> Shared<R> {
        self.devices = Some(devices);
        self
    }

    /// Stops the pods by `groups` at a node shutdown (J3): lowest priority first.
    pub fn with_shutdown_groups(mut self, groups: Vec<PriorityGroup>) -> Shared<R> {
        self.shutdown_groups = groups;
        self
    }

    /// Claims and releases the API objects of API pods in `objects`.
    pub fn with_objects(mut self, objects: objects::Objects) -> Shared<R> {
        self.objects = objects;
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

/// A worker's inbox. Its channel allocates 32 messages at a time, and each pod's worker
/// has one: the large variants are boxed, which keeps a message at 32 bytes (B5).
#[derive(Debug)]
enum Message {
    /// The desired pod of this full name (`None`: no longer desired).
    Desired(Option<Box<Desired>>),
    Task(Box<TaskEvent>),
    /// What the kernel saw in one of the pod's containers (eBPF).
    Kernel(Box<ebpf::Observed>),
    /// An API object the pod refers to changed, or its token is due (V1).
    ObjectsChanged,
    /// The eviction manager chose the pod (E2).
    Evict(Box<Eviction>),
    /// K4: a critical pod was admitted in this pod's place.
    Preempt {
        uid: String,
    },
    /// The node shuts down: stop the pod's containers gracefully (within its priority
    /// group's `grace` too, if the shutdown has groups: J3), report it terminated, and end.
    Shutdown {
        grace: Option<std::time::Duration>,
    },
    /// The agent stops and leaves the pods running: finish what is under way, and end.
    Leave,
}

// B5: what each pod's inbox allocates is 32 of these.
const _: () = assert!(size_of::<Message>() <= 32, "box the large variant of Message");

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
            self.send(&id, Message::Task(Box::new(event)));
        }
    }

    /// What the kernel saw in a container (eBPF).
    fn kernel(&self, observed: ebpf::Observed) {
        let id = observed.container_id.clone();
        self.send(&id, Message::Kernel(Box::new(observed)));
    }
}
