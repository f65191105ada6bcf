//! The pod runtime the agent runs on: containerd for images, containers and tasks, CNI
//! for the network, the pod's namespaces and files for the rest of its sandbox.

mod handler;
mod image_volumes;
mod prefetch;
mod resize;
mod sandbox;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use oci_spec::runtime::Capability;
use outpost_core::lifecycle::{self, CrashLoopConfig, PullPolicy};
use outpost_core::pod::{self, FullName};
use outpost_core::pod_worker::{
    Found, FoundTask, RecordedExit, SandboxProblem, StartFailure, StopSignal, Terminated,
    WaitingReason, exit_code,
};

pub use self::prefetch::Prefetched;
use self::sandbox::Sandbox;
use super::pod_runtime::{Created, NewContainer, PodRuntime, SetUp, TaskState};
use crate::apiserver::events::{EventType, Recorder, pod_ref, reason};
use crate::error_chain::describe;
use crate::objects::Objects;
use crate::runtime::Containerd;
use crate::runtime::cdi;
use crate::runtime::cgroups::{Driver, PodCgroups};
use crate::runtime::cni::Cni;
use crate::runtime::container::{
    self, LABEL_CONTAINER_NAME, LABEL_EXIT_CODE, LABEL_FINISHED_AT, LABEL_GRACE_PERIOD, LABEL_HASH,
    LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_REASON, LABEL_RESTART_COUNT,
    LABEL_STARTED_AT, Listed,
};
use crate::runtime::container_files;
use crate::runtime::events::{self, TaskEvent, timestamp};
use crate::runtime::exec::{self, ExecOutput, Execs};
use crate::runtime::image::credentials::Keyring;
use crate::runtime::image::pull::{self, PullErrorKind, PullOptions};
use crate::runtime::image::resolve::{self, Image};
use crate::runtime::logs;
use crate::runtime::spec::projection::{Object, Reference, Resolution};
use crate::runtime::spec::{self, HostMount, Namespaces, PodContext, layout, projection};
use crate::runtime::stdio;
use crate::runtime::termination;
use crate::runtime::volumes;
use crate::worker::metrics::Metrics;

/// What the runtime is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node_name: String,
    /// The Node's labels (`--node-labels` and the well-known ones): what a
    /// PersistentVolume's node affinity is checked against (K3).
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// The node's address (status.hostIP, and hostNetwork pods' IP).
    pub host_ip: Option<IpAddr>,
    /// `--state-dir`: pods' files and volumes go to `<state-dir>/pods/<uid>`.
    pub state_dir: PathBuf,
    /// Pods' namespaces go to `<run-dir>/pods/<uid>` (gone after a reboot, as they are).
    pub run_dir: PathBuf,
    /// `/var/log/pods`.
    pub pod_log_dir: PathBuf,
    /// This binary (a pod's shared pid namespace's init runs it).
    pub exe: PathBuf,
    /// The container logger containerd's shims run (`runtime::logs::logger_binary`), with
    /// `containerLogger: container`.
    pub logger: PathBuf,
    /// Which process logs containers' output.
    pub container_logger: crate::config::ContainerLogger,
    /// The node logger (with `containerLogger: container`, for containers with stdin
    /// only).
    pub node_logger: crate::runtime::node_logger::NodeLogger,
    /// K2: the cluster DNS servers and domain, and the node's resolv.conf pods start from.
    pub dns: crate::runtime::spec::NodeDns,
    pub crash_loop: CrashLoopConfig,
    pub keyring: Keyring,
    pub pull: PullOptions,
    pub host_capabilities: Vec<Capability>,
    /// `--seccomp-profile-root`: where `Localhost` seccomp profiles are.
    pub seccomp_profile_root: PathBuf,
    /// D3: `--cdi-spec-dir`, where CDI spec files are read, in priority order.
    pub cdi_spec_dirs: Vec<PathBuf>,
    /// What the node can do (admission's facts; AppArmor for the spec).
    pub facts: std::sync::Arc<outpost_core::admission::NodeFacts>,
    /// The API objects API pods refer to (their volumes, env and pull secrets).
    pub objects: Objects,
    /// The host's kernel, as the agent reads it.
    pub host: std::sync::Arc<dyn crate::host::Host>,
    /// The garbage collector (image GC runs after a pull; dead containers are its).
    pub gc: crate::gc::Handle,
    /// The pods' cgroups (Q2): each pod's is made at sandbox set-up, its containers go
    /// under it.
    pub cgroups: std::sync::Arc<PodCgroups>,
    /// Which containers share a runc shim.
    pub shim_grouping: crate::config::ShimGrouping,
    /// The node's runtime handlers (D5): the default one (`--runtime`) and those
    /// configured, which pods' RuntimeClasses name.
    pub handlers: std::sync::Arc<crate::runtime::handler::Handlers>,
    /// D2: the device manager, which says what a container's devices need.
    pub devices: Option<crate::devices::Manager>,
    /// D6: what the containers' swap limits are decided from (read at start, as kubelet
    /// reads its machine info once).
    pub swap: spec::NodeSwap,
}

/// containerd, CNI and the host, as a [`PodRuntime`].
#[derive(Debug)]
pub struct Pods {
    pub containerd: Containerd,
    pub cni: Cni,
    pub settings: Settings,
    /// kubelet's image and container Events (Pulling, Pulled, Created, Started, …).
    pub events: Recorder,
    /// Counts image pulls.
    pub metrics: Metrics,
    /// Runs probes' and hooks' commands in containers.
    pub execs: Execs,
    /// Bounds the CNI ADDs and DELs and the container creations and starts that run at
    /// once ([`start_parallelism`]).
    pub starts: tokio::sync::Semaphore,
    /// New pods' images, resolved while their sandboxes are set up.
    pub prefetched: Prefetched,
    /// The host the pods' mounts are read from, their volumes given to their `fsGroup`
    /// and their pid namespace's init found through.
    pub host: std::sync::Arc<dyn crate::host::Host>,
}

/// How many CNI ADDs and DELs, container creations and starts run at once: a
/// burst of pods (a reboot, 100 manifests dropped together) is neither a serial queue nor
/// hundreds of runc and CNI plugin processes fighting for the CPU and containerd's
/// metadata lock. Twice the CPUs keeps every core busy while some calls wait on disk.
pub fn start_parallelism(cpus: u32) -> usize {
    usize::try_from(cpus).unwrap_or(usize::MAX).saturating_mul(2).clamp(4, 16)
}

impl Pods {
    /// Waits for a turn among the [`start_parallelism`] heavy calls, then makes `call`.
    async fn limited<T>(&self, call: impl Future<Output = T>) -> T {
        // Never closed; were it, the call would go unbounded rather than fail.
        let _permit = self.starts.acquire().await.ok();
        call.await
    }

    /// `<state-dir>/pods`: each pod's files and volumes, by UID.
    pub fn pods_dir(&self) -> PathBuf {
        self.settings.state_dir.join("pods")
    }

    /// `<run-dir>/io`: the stdio FIFOs of containers, by container ID.
    pub fn io_dir(&self) -> PathBuf {
        self.settings.run_dir.join("io")
    }

    /// `<run-dir>/pods`: each pod's namespaces, by UID.
    pub fn run_pods_dir(&self) -> PathBuf {
        self.settings.run_dir.join("pods")
    }

    /// D3: `spec` with CDI devices injected from the spec files of `--cdi-spec-dir` (read
    /// only when there are some): `cdi_devices` (the device plugins' `Allocate` answers'),
    /// then those the `cdi.k8s.io/` annotations name: the spec's (the plugins'
    /// annotations, as containerd reads the container's) over the pod's. A name that is
    /// not resolved fails the container (`CreateContainerError`), naming it and the
    /// directories.
    async fn inject_cdi_devices(
        &self,
        spec: oci_spec::runtime::Spec,
        pod: &Pod,
        cdi_devices: &[String],
    ) -> Result<oci_spec::runtime::Spec, StartFailure> {
        let create_error =
            |message| StartFailure::new(WaitingReason::CreateContainerError, message);
        let mut annotations = pod.metadata.annotations.clone().unwrap_or_default();
        annotations
            .extend(spec.annotations().iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
        let devices = spec::cdi::requested(cdi_devices, &annotations)
            .map_err(|e| create_error(describe(&e)))?;
        if devices.is_empty() {
            return Ok(spec);
        }
        let dirs = self.settings.cdi_spec_dirs.clone();
        cdi::inject(spec, devices, dirs).await.map_err(|e| create_error(describe(&e)))
    }

    /// X1: the process namespace of the running container `target` (its task's
    /// `/proc/<pid>/ns/pid`, as containerd's CRI joins a `TARGET` namespace); its task
    /// gone, the start fails as kubelet's does and is tried again.
    async fn target_pid_namespace(&self, target: &str) -> Result<PathBuf, StartFailure> {
        let process = container::task(&self.containerd, target).await;
        let running = process
            .ok()
            .flatten()
            .filter(|p| p.status() == containerd_client::types::v1::Status::Running && p.pid != 0);
        let Some(process) = running else {
            let message = format!("unable to find target container {target}");
            return Err(StartFailure::new(WaitingReason::CreateContainerConfigError, message));
        };
        Ok(outpost_host::Pid::Id(process.pid).path("ns/pid"))
    }

    /// Where container `id`'s output goes: FIFOs registered with the node logger (with
    /// `containerLogger: node`, or for stdin; released, the registration dropped, once
    /// the task is created or its creation failed), or the shim's per-container logger.
    async fn container_stdio(
        &self,
        container: &Container,
        id: &str,
        log_path: &std::path::Path,
    ) -> Result<(Option<crate::runtime::node_logger::Registration>, stdio::Stdio), StartFailure>
    {
        let create_error =
            |message| StartFailure::new(WaitingReason::CreateContainerError, message);
        let terminal = container.tty.unwrap_or(false);
        let stdin = container.stdin.unwrap_or(false);
        let node = self.settings.container_logger == crate::config::ContainerLogger::Node;
        if node || stdin {
            let io_dir = self.io_dir();
            let registered =
                self.settings.node_logger.register(&io_dir, id, log_path, terminal, stdin).await;
            let registration = registered.map_err(|e| create_error(describe(&e)))?;
            let stdio = registration.stdio.clone();
            return Ok((Some(registration), stdio));
        }
        let uri = logs::logger_uri(&self.settings.logger, log_path)
            .map_err(|e| create_error(describe(&e)))?;
        Ok((None, stdio::Stdio::logged(&uri, terminal)))
    }
}

impl PodRuntime for Pods {
    type Sandbox = Sandbox;
    type Image = Image;

    async fn set_up_sandbox(&self, pod: &Pod) -> Result<SetUp<Sandbox>, SandboxProblem> {
        let (sandbox, fresh) = sandbox::set_up(self, pod).await?;
        let ips = sandbox.ips.clone();
        Ok(SetUp { sandbox, ips, fresh })
    }

    async fn refresh_volumes(&self, pod: &Pod) {
        sandbox::refresh_volumes(self, pod).await;
    }

    async fn release_volumes(&self, uid: &str) {
        sandbox::release_volumes(self, uid).await;
    }

    async fn tear_down_sandbox(&self, uid: &str) {
        sandbox::tear_down(self, uid).await;
    }

    async fn ensure_image(&self, pod: &Pod, container: &Container) -> Result<Image, StartFailure> {
        // V4: kubelet pulls the image volumes first; a container mounting one that
        // cannot be had waits with its error.
        image_volumes::ensure(self, pod, container).await?;
        let reference = container.image.as_deref().unwrap_or_default();
        let object = pod_ref(pod, Some(&container.name));
        ensure_image(self, pod, reference, PullPolicy::of(container), &object).await
    }

    async fn termination_message(
        &self,
        pod: &Pod,
        container: &Container,
        id: &str,
        exit_code: i32,
    ) -> Option<String> {
        let uid = pod::uid(pod);
        let file =
            layout::termination_message_file(&self.pods_dir().join(uid), &container.name, id);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let log_dir = logs::pod_log_dir(&self.settings.pod_log_dir, &namespace, &name, uid)
            .join(&container.name);
        let container = container.clone();
        let span = tracing::Span::current();
        let read = tokio::task::spawn_blocking(move || {
            let _pod = span.enter();
            let pod = format!("{namespace}/{name}");
            let exited = termination::Exited {
                container: &container,
                exit_code,
                file: &file,
                log_dir: &log_dir,
                pod: &pod,
            };
            termination::message(&exited)
        });
        read.await.unwrap_or_else(|e| {
            tracing::warn!(container_id = id, error = %describe(&e), "reading the termination message failed");
            None
        })
    }

    async fn create_container(
        &self,
        new: NewContainer<'_, Sandbox, Image>,
    ) -> Result<Created, StartFailure> {
        let NewContainer { pod, sandbox, container, image, restart_count, hash, target } = new;
        let id = new_container_id();
        let uid = pod::uid(pod);
        let cgroups_path = self.settings.cgroups.container_path(&sandbox.cgroup, &id);
        let ns = &sandbox.namespaces;
        let resolved =
            self.settings.objects.resolve(pod, &projection::container_references(container)).await;
        // K1: read at each start only: a changed Service does not restart a container.
        let services = self.settings.objects.service_env(pod).map_err(|message| {
            StartFailure::new(WaitingReason::CreateContainerConfigError, message.to_owned())
        })?;
        let host_mounts = host_mounts(&*self.settings.host, container);
        let target_pid = match target {
            Some(target) => Some(self.target_pid_namespace(target).await?),
            None => None,
        };
        let context = PodContext {
            pod,
            node_name: &self.settings.node_name,
            pod_ips: &sandbox.ips,
            host_ip: self.settings.host_ip,
            cluster_domain: &self.settings.dns.cluster_domain,
            namespaces: Namespaces {
                pid: target_pid.as_deref().or(sandbox.pid_namespace.as_deref()),
                network: ns.network.as_deref(),
                ipc: ns.ipc.as_deref(),
                uts: ns.uts.as_deref(),
            },
            dev_shm: &sandbox.dev_shm,
            pod_dir: &sandbox.pod_dir,
            cgroups_path: &cgroups_path,
            host_capabilities: &self.settings.host_capabilities,
            apparmor_enabled: self.settings.facts.apparmor_enabled,
            resolved: &resolved,
            services: &services,
            claimed: &sandbox.claimed,
            host_mounts: &host_mounts,
            swap: self.settings.swap,
            recursive_read_only: recursive_read_only(&*self.settings.host),
        };
        let config_error =
            |message| StartFailure::new(WaitingReason::CreateContainerConfigError, message);
        let mut files = container_files::read(
            &self.containerd,
            &image.chain_id,
            pod,
            container,
            &self.settings.seccomp_profile_root,
        )
        .await
        .map_err(|e| config_error(describe(&e)))?;
        files.env_files = container_files::env_files(&sandbox.pod_dir, pod, container)
            .map_err(|e| config_error(describe(&e)))?;
        let mut cdi_devices = Vec::new();
        if let Some(devices) = &self.settings.devices {
            let given = devices.container_devices(pod, container).await;
            let given = given.map_err(|e| config_error(describe(&e)))?;
            files.devices = crate::devices::nodes::plugin_devices(&given)
                .map_err(|e| config_error(describe(&e)))?;
            cdi_devices = crate::devices::nodes::cdi_names(&given);
        }
        let mut spec = spec::container_spec(&context, container, &image.config, &files, &id)
            .map_err(|e| match e {
                // D6: containerd's CRI fails the create itself (kubelet's CreateContainerError).
                spec::Error::PropagationSource { .. } => {
                    StartFailure::new(WaitingReason::CreateContainerError, describe(&e))
                }
                _ => config_error(describe(&e)),
            })?;
        // kubelet makes a `subPathExpr`'s directory once it is expanded.
        spec::sub_path_dirs(&context, container, &files)
            .map_err(|e| config_error(describe(&e)))
            .and_then(|dirs| {
                volumes::make_sub_path_dirs(pod, &dirs).map_err(|e| config_error(describe(&e)))
            })?;
        let group = self.settings.shim_grouping.group(uid, sandbox.handler_name.as_deref());
        let mut annotations = spec.annotations().clone().unwrap_or_default();
        annotations.insert(container::ANNOTATION_SHIM_GROUP.to_owned(), group);
        spec.set_annotations(Some(annotations));
        // D3: last, as containerd's CRI injects CDI devices after the rest of the spec.
        let spec = self.inject_cdi_devices(spec, pod, &cdi_devices).await?;
        let create_error =
            |message| StartFailure::new(WaitingReason::CreateContainerError, message);
        let object = pod_ref(pod, Some(&container.name));
        for message in spec::invalid_env_var_names(pod, container, &resolved) {
            let kind = EventType::Warning;
            self.events.emit(&object, kind, reason::INVALID_ENVIRONMENT_VARIABLE_NAMES, message);
        }
        let message_file = layout::termination_message_file(&sandbox.pod_dir, &container.name, &id);
        termination::create(&message_file).map_err(|e| create_error(describe(&e)))?;
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let log_path = logs::container_log_path(
            &self.settings.pod_log_dir,
            namespace,
            name,
            uid,
            &container.name,
            restart_count,
        );
        // FIFOs registered with the node logger (released, the value dropped, once the
        // task is created or its creation failed), or the shim's per-container logger.
        let (registration, stdio) = self.container_stdio(container, &id, &log_path).await?;
        let started_at = Timestamp::now();
        let new = container::NewContainer {
            id: &id,
            image: &image.name,
            parent_snapshot: &image.chain_id,
            spec: &spec,
            labels: labels(pod, &container.name, restart_count, hash, started_at),
            stdio: &stdio,
            systemd_cgroup: self.settings.cgroups.layout().driver == Driver::Systemd,
            handler: &sandbox.handler,
        };
        let created = self.limited(container::create(&self.containerd, &new)).await;
        drop(registration);
        created.map_err(|e| create_error(describe(&e)))?;
        Ok(Created { id, image_id: image.digest.clone(), started_at })
    }

    async fn start_container(&self, id: &str) -> Result<(), StartFailure> {
        self.limited(container::start(&self.containerd, id))
            .await
            .map(|_pid| ())
            .map_err(|e| StartFailure::new(WaitingReason::RunContainerError, describe(&e)))
    }

    async fn kill(&self, id: &str, signal: StopSignal) -> Result<(), container::Error> {
        let (signal, all) = match signal {
            StopSignal::Term => (libc::SIGTERM, false),
            StopSignal::Kill => (libc::SIGKILL, true),
        };
        container::kill(&self.containerd, id, signal, all).await
    }

    async fn task(&self, id: &str) -> Result<TaskState, container::Error> {
        let process = container::task(&self.containerd, id).await?;
        Ok(match process {
            None => TaskState::Missing,
            Some(p) if p.status() == containerd_client::types::v1::Status::Running => {
                TaskState::Running
            }
            Some(p) => TaskState::Exited {
                exit_status: p.exit_status,
                exited_at: p.exited_at.as_ref().and_then(timestamp),
            },
        })
    }

    async fn delete_task(&self, id: &str, wait: bool) -> Result<(), container::Error> {
        if wait {
            container::reap(&self.containerd, id, container::REAP_WAIT).await?;
        } else {
            container::delete_task(&self.containerd, id).await?;
        }
        Ok(())
    }

    async fn record_exit(&self, id: &str, t: &Terminated) -> Result<(), container::Error> {
        let mut labels = HashMap::new();
        labels.insert(LABEL_EXIT_CODE.to_owned(), t.exit_code.to_string());
        labels.insert(LABEL_REASON.to_owned(), t.reason.as_str().to_owned());
        if let Some(at) = t.finished_at {
            labels.insert(LABEL_FINISHED_AT.to_owned(), at.to_string());
        }
        container::label(&self.containerd, id, labels).await
    }

    async fn remove_container(&self, id: &str) -> Result<(), container::Error> {
        container::remove(&self.containerd, id).await?;
        self.execs.forget(id);
        Ok(())
    }

    async fn exec(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, exec::Error> {
        self.execs.run(id, command, timeout).await
    }

    async fn list(&self) -> Result<Vec<(FullName, Found)>, container::Error> {
        let listed = container::list(&self.containerd).await?;
        Ok(listed.into_iter().filter_map(found).collect())
    }

    async fn watch_events(&self, deliver: impl FnMut(TaskEvent) -> bool + Send) {
        events::watch(self.containerd.clone(), deliver).await;
    }

    async fn remove_orphans(&self, owned: &HashSet<String>) {
        sandbox::remove_orphans(self, owned).await;
    }

    async fn resize(
        &self,
        pod: &Pod,
        actual: &Pod,
        containers: &[outpost_core::pod_worker::ResizeContainer],
    ) -> (Vec<(String, k8s_openapi::api::core::v1::ResourceRequirements)>, Option<String>) {
        resize::resize(self, pod, actual, containers).await
    }
}

/// What a listed container's labels and task say, for adoption.
fn found(listed: Listed) -> Option<(FullName, Found)> {
    let name = FullName {
        namespace: listed.label(LABEL_POD_NAMESPACE)?.to_owned(),
        name: listed.label(LABEL_POD_NAME)?.to_owned(),
    };
    let label = |key: &str| listed.label(key).map(str::to_owned);
    let task = match &listed.task {
        None => FoundTask::None,
        Some(t) if t.status() == containerd_client::types::v1::Status::Running => {
            FoundTask::Running
        }
        Some(t) => FoundTask::NotRunning {
            exit_code: exit_code(t.exit_status),
            exited_at: t.exited_at.as_ref().and_then(timestamp),
        },
    };
    let found = Found {
        pod_uid: label(LABEL_POD_UID),
        container: label(LABEL_CONTAINER_NAME),
        restart_count: listed.label(LABEL_RESTART_COUNT).and_then(|c| c.parse().ok()).unwrap_or(0),
        hash: label(LABEL_HASH),
        started_at: listed
            .label(LABEL_STARTED_AT)
            .and_then(|t| t.parse().ok())
            .or_else(|| listed.created_at.as_ref().and_then(timestamp)),
        grace: listed
            .label(LABEL_GRACE_PERIOD)
            .and_then(|g| g.parse().ok())
            .map(Duration::from_secs),
        task,
        recorded_exit: RecordedExit {
            exit_code: listed.label(LABEL_EXIT_CODE).and_then(|c| c.parse().ok()),
            reason: label(LABEL_REASON),
            finished_at: listed.label(LABEL_FINISHED_AT).and_then(|t| t.parse().ok()),
        },
        resources: listed
            .label(crate::runtime::container::LABEL_RESOURCES)
            .and_then(|r| serde_json::from_str(r).ok()),
        id: listed.id,
    };
    Some((name, found))
}

/// The image `reference` (a container's, or an image volume's), pulled first if `policy`
/// says so. An `Always` image that cannot be pulled because the registry is unreachable
/// runs from the local copy when there is one: an edge node must restart its pods with
/// no network. Records kubelet's image events on `object` (the container, or the pod).
async fn ensure_image(
    pods: &Pods,
    pod: &Pod,
    reference: &str,
    policy: PullPolicy,
    object: &ObjectReference,
) -> Result<Image, StartFailure> {
    let events = &pods.events;
    let prefetched = pods.prefetched.take(pod::uid(pod), reference);
    let present = match prefetched {
        Some(image) => Ok(Some(image)),
        None => resolve::resolve(&pods.containerd, reference).await,
    };
    let present = present.map_err(|e| {
        let message = format!("Failed to inspect image \"{reference}\": {}", describe(&e));
        events.emit(object, EventType::Warning, reason::INSPECT_FAILED, message.clone());
        StartFailure::new(WaitingReason::InspectFailed, message)
    })?;
    match (policy, present) {
        (PullPolicy::Never, None) => {
            let message =
                format!("Container image \"{reference}\" is not present with pull policy of Never");
            events.emit(object, EventType::Warning, reason::ERR_IMAGE_NEVER_PULL, message.clone());
            Err(StartFailure::new(WaitingReason::ErrImageNeverPull, message))
        }
        (PullPolicy::Never | PullPolicy::IfNotPresent, Some(image)) => {
            events.emit(
                object,
                EventType::Normal,
                reason::PULLED,
                format!("Container image \"{reference}\" already present on machine"),
            );
            Ok(image)
        }
        (_, present) => {
            let keyring = pull_keyring(pods, pod).await;
            pull_image(pods, reference, &keyring, present, object).await
        }
    }
}

/// The credentials a pull for `pod` tries: its `imagePullSecrets` (which the API server
/// filled from its service account's when it had none), then the node's credentials
/// file, as kubelet does. Secrets that cannot be had are skipped, with kubelet's
/// FailedToRetrieveImagePullSecret warning.
async fn pull_keyring(pods: &Pods, pod: &Pod) -> Keyring {
    let references = projection::pull_secret_references(pod);
    if references.is_empty() {
        return pods.settings.keyring.clone();
    }
    let resolved = pods.settings.objects.resolve(pod, &references).await;
    let mut keyring = Keyring::default();
    let mut missing = Vec::new();
    for (reference, resolution) in resolved.0 {
        let Reference::Secret(name) = reference else { continue };
        let secret = match resolution {
            Resolution::Found(Object::Secret(secret)) => secret,
            _ => {
                missing.push(name);
                continue;
            }
        };
        let data = secret.data.as_ref();
        let config = [".dockerconfigjson", ".dockercfg"]
            .into_iter()
            .find_map(|key| data.and_then(|d| d.get(key)));
        match config.map(|bytes| Keyring::from_docker_config(&bytes.0)) {
            Some(Ok(found)) => keyring.merge(found),
            Some(Err(e)) => {
                tracing::warn!(pod.uid = pod::uid(pod), secret = name, error = %describe(&e), "cannot read an image pull secret");
                missing.push(name);
            }
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        let message = format!(
            "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
            missing.join(", ")
        );
        let object = pod_ref(pod, None);
        pods.events.emit(
            &object,
            EventType::Warning,
            reason::FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
            message,
        );
    }
    keyring.merge(pods.settings.keyring.clone());
    keyring
}

async fn pull_image(
    pods: &Pods,
    reference: &str,
    keyring: &Keyring,
    present: Option<Image>,
    object: &ObjectReference,
) -> Result<Image, StartFailure> {
    let events = &pods.events;
    events.emit(
        object,
        EventType::Normal,
        reason::PULLING,
        format!("Pulling image \"{reference}\""),
    );
    let began = std::time::Instant::now();
    let pulled = pull::pull(&pods.containerd, reference, keyring, &pods.settings.pull).await;
    match (pulled, present) {
        (Ok(_), _) => {
            pods.metrics.image_pulled(began.elapsed());
            pods.settings.gc.collect_images_now();
            events.emit(
                object,
                EventType::Normal,
                reason::PULLED,
                format!(
                    "Successfully pulled image \"{reference}\" in {:.3}s",
                    began.elapsed().as_secs_f64()
                ),
            );
            resolve::resolve(&pods.containerd, reference)
                .await
                .map_err(|e| StartFailure::new(WaitingReason::InspectFailed, describe(&e)))?
                .ok_or_else(|| {
                    StartFailure::new(
                        WaitingReason::ErrImagePull,
                        format!("image \"{reference}\" was pulled but is not in containerd"),
                    )
                })
        }
        (Err(e), Some(image)) if e.kind() == PullErrorKind::Unreachable => {
            tracing::warn!(image = reference, error = %describe(&e),
                "registry unreachable; running the image already present");
            Ok(image)
        }
        (Err(e), _) => {
            let message = describe(&e);
            events.emit(
                object,
                EventType::Warning,
                reason::FAILED,
                format!("Failed to pull image \"{reference}\": {message}"),
            );
            Err(StartFailure::new(WaitingReason::ErrImagePull, message))
        }
    }
}

/// A new containerd container ID (CRI style: random hex).
fn new_container_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// The CRI labels a container of `pod` carries (adoption and the garbage collector read
/// them).
fn labels(
    pod: &Pod,
    container: &str,
    restart_count: u32,
    hash: &str,
    started_at: Timestamp,
) -> HashMap<String, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    [
        (LABEL_POD_UID, pod::uid(pod).to_owned()),
        (LABEL_POD_NAMESPACE, namespace.to_owned()),
        (LABEL_POD_NAME, name.to_owned()),
        (LABEL_CONTAINER_NAME, container.to_owned()),
        (LABEL_RESTART_COUNT, restart_count.to_string()),
        (LABEL_HASH, hash.to_owned()),
        (LABEL_STARTED_AT, started_at.to_string()),
        (LABEL_GRACE_PERIOD, lifecycle::grace_period(pod).as_secs().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Whether this node has recursively read-only mounts: runc's `rro` (runc 1.1 and
/// later, which Outpost needs) on a kernel with `mount_setattr(2)`.
fn recursive_read_only(host: &dyn crate::host::Host) -> bool {
    host.proc("sys/kernel/osrelease")
        .is_ok_and(|release| spec::recursive_read_only::kernel_supports(&release))
}

/// D6: the host's mounts, read when one of `container`'s volume mounts asks for
/// `mountPropagation` (what its source is on decides whether it can have it).
fn host_mounts(host: &dyn crate::host::Host, container: &Container) -> Vec<HostMount> {
    let mut mounts = container.volume_mounts.iter().flatten();
    if !mounts.any(|m| m.mount_propagation.as_deref().is_some_and(|p| p != "None")) {
        return Vec::new();
    }
    match host.mountinfo() {
        Ok(mounts) => mounts
            .into_iter()
            .map(|m| HostMount { mount_point: m.mount_point, shared: m.shared, slave: m.slave })
            .collect(),
        Err(error) => {
            tracing::warn!(error = %describe(&error), "cannot read the host's mounts for a volume mount's propagation");
            Vec::new()
        }
    }
}
