//! A simulated [`PodRuntime`] for hollow nodes (B13, `cargo xtask fleet`): the real pod
//! workers, status sync and everything above them run, but no container does. A pod's
//! sandbox is set up at once (one address per node), images are "present", a created
//! container runs as soon as it is started, and it exits only when told: by a kill (143
//! for SIGTERM, 137 for SIGKILL) or by [`Hollow::exit`], which the fleet harness uses to
//! make restarts happen on demand. Exits reach the workers as containerd's task events
//! would. Probes' and hooks' `exec` succeed at once.
//!
//! Built only with the `hollow` feature: the agent's binary does not carry it.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{Found, SandboxProblem, StartFailure, StopSignal, Terminated};
use tokio::sync::mpsc;

use super::pod_runtime::{Created, NewContainer, PodRuntime, SetUp, TaskState};
use crate::runtime::container;
use crate::runtime::events::TaskEvent;
use crate::runtime::exec::{self, ExecOutput};

/// One simulated container.
#[derive(Debug, Clone)]
struct Simulated {
    pod: FullName,
    name: String,
    task: TaskState,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    containers: HashMap<String, Simulated>,
    /// Where task events go: the dispatcher's subscription(s).
    subscribers: Vec<mpsc::UnboundedSender<TaskEvent>>,
}

/// The simulated runtime of one hollow node. Shared (`Arc`) between the node's pod
/// workers and the harness that makes its containers exit.
#[derive(Debug, Default)]
pub struct Hollow {
    state: Mutex<State>,
}

/// What a hollow node's pod workers work with, from the other components.
#[derive(Debug)]
pub struct Deps {
    pub batches: mpsc::Receiver<crate::podconfig::Batch>,
    pub objects: crate::objects::Objects,
    pub changes: crate::objects::Changes,
    pub statuses: crate::status::StatusStore,
    pub events: crate::apiserver::Recorder,
    pub ebpf: crate::ebpf::Handle,
    pub stop_pods: tokio_util::sync::CancellationToken,
}

/// The `pod_workers` task of a hollow node: the real workers over `hollow`. No eviction
/// manager: nothing feeds its channel.
pub fn pod_workers(
    hollow: Arc<Hollow>,
    host_ip: Option<IpAddr>,
    facts: outpost_core::admission::NodeFacts,
    deps: Deps,
    metrics: super::metrics::Metrics,
) -> crate::task::Task {
    let settings = outpost_core::pod_worker::Settings {
        crash_loop: outpost_core::lifecycle::CrashLoopConfig::default(),
        host_ip,
        seed: fastrand::u64(..),
        facts: Arc::new(facts),
    };
    let (_evict, evictions) = mpsc::unbounded_channel();
    let task = async move {
        let prober = super::probe::Prober::new()?;
        let workers = super::Shared::with_runtime(
            hollow,
            settings,
            deps.statuses,
            deps.events,
            metrics,
            deps.ebpf,
            prober,
        )
        .with_objects(deps.objects);
        super::run(Arc::new(workers), deps.batches, deps.changes, evictions, deps.stop_pods).await;
        Ok::<(), super::probe::Error>(())
    };
    crate::task::Task::new("pod_workers", task).main()
}

impl Hollow {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the running container `container` of pod `namespace/name` exit with
    /// `code`, as if its process ended; returns whether one was running.
    pub fn exit(&self, namespace: &str, name: &str, container: &str, code: u32) -> bool {
        let mut state = self.state();
        let found = state.containers.iter_mut().find(|(_, c)| {
            c.pod.namespace == namespace
                && c.pod.name == name
                && c.name == container
                && c.task == TaskState::Running
        });
        let Some((id, simulated)) = found else { return false };
        let exited_at = Some(Timestamp::now());
        simulated.task = TaskState::Exited { exit_status: code, exited_at };
        let event = TaskEvent::Exit { container_id: id.clone(), exit_status: code, exited_at };
        state.subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
        true
    }

    /// Containers running now.
    pub fn running(&self) -> usize {
        self.state().containers.values().filter(|c| c.task == TaskState::Running).count()
    }
}

/// The runtime version a hollow node reports (the Node's `containerRuntimeVersion`).
pub const VERSION: &str = "hollow://0.1.0";

/// The address every pod of a hollow node gets.
const POD_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 244, 0, 2));

impl PodRuntime for Arc<Hollow> {
    /// The pod's UID.
    type Sandbox = String;
    /// The image reference.
    type Image = String;

    async fn set_up_sandbox(&self, pod: &Pod) -> Result<SetUp<String>, SandboxProblem> {
        let uid = outpost_core::pod::uid(pod).to_owned();
        Ok(SetUp { sandbox: uid, ips: vec![POD_IP], fresh: true })
    }

    async fn refresh_volumes(&self, _pod: &Pod) {}

    async fn release_volumes(&self, _uid: &str) {}

    async fn tear_down_sandbox(&self, _uid: &str) {}

    async fn ensure_image(
        &self,
        _pod: &Pod,
        container: &Container,
    ) -> Result<String, StartFailure> {
        Ok(container.image.clone().unwrap_or_default())
    }

    async fn create_container(
        &self,
        new: NewContainer<'_, String, String>,
    ) -> Result<Created, StartFailure> {
        let mut state = self.state();
        state.next_id += 1;
        let id = format!("hollow-{}", state.next_id);
        let simulated = Simulated {
            pod: FullName::of(new.pod),
            name: new.container.name.clone(),
            task: TaskState::Exited { exit_status: 0, exited_at: None },
        };
        state.containers.insert(id.clone(), simulated);
        Ok(Created {
            id,
            image_id: format!("hollow://{}", new.image),
            started_at: Timestamp::now(),
        })
    }

    async fn start_container(&self, id: &str) -> Result<(), StartFailure> {
        if let Some(simulated) = self.state().containers.get_mut(id) {
            simulated.task = TaskState::Running;
        }
        Ok(())
    }

    async fn kill(&self, id: &str, signal: StopSignal) -> Result<(), container::Error> {
        let code = match signal {
            StopSignal::Term => 128 + 15,
            StopSignal::Kill => 128 + 9,
        };
        let found = self.state().containers.get(id).cloned();
        // A container already gone is killed (as containerd's NotFound is taken).
        if let Some(simulated) = found {
            self.exit(&simulated.pod.namespace, &simulated.pod.name, &simulated.name, code);
        }
        Ok(())
    }

    async fn task(&self, id: &str) -> Result<TaskState, container::Error> {
        Ok(self.state().containers.get(id).map_or(TaskState::Missing, |c| c.task))
    }

    async fn delete_task(&self, id: &str, _wait: bool) -> Result<(), container::Error> {
        if let Some(simulated) = self.state().containers.get_mut(id) {
            simulated.task = TaskState::Missing;
        }
        Ok(())
    }

    async fn record_exit(
        &self,
        _id: &str,
        _terminated: &Terminated,
    ) -> Result<(), container::Error> {
        Ok(())
    }

    async fn termination_message(
        &self,
        _pod: &Pod,
        _container: &Container,
        _id: &str,
        _exit_code: i32,
    ) -> Option<String> {
        None
    }

    async fn remove_container(&self, id: &str) -> Result<(), container::Error> {
        self.state().containers.remove(id);
        Ok(())
    }

    async fn exec(
        &self,
        _id: &str,
        _command: &[String],
        _timeout: Duration,
    ) -> Result<ExecOutput, exec::Error> {
        Ok(ExecOutput { exit_code: 0, output: Vec::new() })
    }

    async fn list(&self) -> Result<Vec<(FullName, Found)>, container::Error> {
        // A hollow node starts empty: nothing to adopt.
        Ok(Vec::new())
    }

    async fn watch_events(&self, mut deliver: impl FnMut(TaskEvent) -> bool + Send) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.state().subscribers.push(tx);
        while let Some(event) = rx.recv().await {
            if !deliver(event) {
                return;
            }
        }
    }

    async fn remove_orphans(&self, _owned: &HashSet<String>) {}

    async fn resize(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
        _actual: &k8s_openapi::api::core::v1::Pod,
        containers: &[outpost_core::pod_worker::ResizeContainer],
    ) -> (Vec<(String, k8s_openapi::api::core::v1::ResourceRequirements)>, Option<String>) {
        // A hollow node's containers have no cgroups: every resize takes.
        (containers.iter().map(|c| (c.container_id.clone(), c.resources.clone())).collect(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web", "namespace": "default", "uid": "u1" },
            "spec": { "containers": [{ "name": "main", "image": "app:1" }] },
        }))
        .unwrap()
    }

    async fn started(hollow: &Arc<Hollow>, pod: &Pod) -> String {
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let sandbox = hollow.set_up_sandbox(pod).await.unwrap().sandbox;
        let image = hollow.ensure_image(pod, container).await.unwrap();
        let new = NewContainer {
            pod,
            sandbox: &sandbox,
            container,
            image: &image,
            restart_count: 0,
            hash: "h",
            target: None,
        };
        let id = hollow.create_container(new).await.unwrap().id;
        assert!(matches!(hollow.task(&id).await.unwrap(), TaskState::Exited { .. }));
        hollow.start_container(&id).await.unwrap();
        id
    }

    /// B13: a hollow container runs once started and exits when told, the exit reaching
    /// the task-event subscriber as containerd's would.
    #[tokio::test]
    async fn b13_containers_run_at_once_and_exit_on_demand_or_when_killed() {
        let hollow = Arc::new(Hollow::default());
        let (tx, mut events) = mpsc::unbounded_channel();
        let watcher = hollow.clone();
        tokio::spawn(
            async move { watcher.watch_events(move |event| tx.send(event).is_ok()).await },
        );
        tokio::task::yield_now().await;
        let pod = pod();
        let id = started(&hollow, &pod).await;
        assert_eq!(hollow.task(&id).await.unwrap(), TaskState::Running);
        assert_eq!(hollow.running(), 1);

        assert!(hollow.exit("default", "web", "main", 3));
        assert!(!hollow.exit("default", "web", "main", 3), "no longer running");
        let Some(TaskEvent::Exit { container_id, exit_status: 3, .. }) = events.recv().await else {
            panic!("no exit event")
        };
        assert_eq!(container_id, id);
        hollow.delete_task(&id, true).await.unwrap();
        assert_eq!(hollow.task(&id).await.unwrap(), TaskState::Missing);

        let again = started(&hollow, &pod).await;
        hollow.kill(&again, StopSignal::Term).await.unwrap();
        let Some(TaskEvent::Exit { exit_status, .. }) = events.recv().await else {
            panic!("no exit event")
        };
        assert_eq!(exit_status, 143);
        hollow.remove_container(&again).await.unwrap();
        assert_eq!(hollow.task(&again).await.unwrap(), TaskState::Missing);
        assert_eq!(hollow.running(), 0);
    }
}
