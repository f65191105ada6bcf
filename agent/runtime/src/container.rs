//! One container in containerd: the container record (spec, labels, snapshot key), its
//! rootfs snapshot and its task. The calls a pod worker makes, in containerd's terms.
//!
//! A container is created record first, so the snapshot prepared next is referenced (and
//! kept from containerd's GC) from the moment it exists. Its labels are the CRI's, so
//! `ctr containers ls` reads like `crictl ps`, and they are all the agent needs to adopt a
//! container after a restart.

use std::collections::HashMap;
use std::time::Duration;

use containerd_client::services::v1::snapshots::{PrepareSnapshotRequest, RemoveSnapshotRequest};
use containerd_client::services::v1::{
    CloseIoRequest, Container, CreateContainerRequest, CreateTaskRequest, DeleteContainerRequest,
    DeleteTaskRequest, GetContainerRequest, GetRequest, KillRequest, ListContainersRequest,
    ListTasksRequest, StartRequest, UpdateContainerRequest, UpdateTaskRequest, WaitRequest,
};
use containerd_client::types::v1::{Process, Status};
use oci_spec::runtime::Spec;
use outpost_core::backoff::Backoff;
use prost_types::FieldMask;

use super::Containerd;
use super::handler::Handler;
use super::image::SNAPSHOTTER;

/// How long to wait for containerd to see a killed or exited task stop before deleting it.
pub const REAP_WAIT: Duration = Duration::from_secs(10);

/// The OCI annotation containerd's runc shim groups containers by: the containers whose
/// specs carry the same value share one shim (its socket is named after the value).
pub const ANNOTATION_SHIM_GROUP: &str = "io.containerd.runc.v2.group";
/// The shim group of every container when the node's containers share one shim.
pub const NODE_SHIM_GROUP: &str = "outpost-node";

/// The type URL containerd's clients give an OCI runtime spec.
const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";

/// CRI's label names (kubelet and crictl habits).
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
pub const LABEL_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const LABEL_HASH: &str = "io.kubernetes.container.hash";
pub const LABEL_GRACE_PERIOD: &str = "io.kubernetes.pod.terminationGracePeriod";
/// Set by Outpost once the container's task has exited and been deleted.
pub const LABEL_EXIT_CODE: &str = "io.outpost.container.exitCode";
pub const LABEL_STARTED_AT: &str = "io.outpost.container.startedAt";
pub const LABEL_FINISHED_AT: &str = "io.outpost.container.finishedAt";
pub const LABEL_REASON: &str = "io.outpost.container.reason";
/// K6: the cpu and memory (a `ResourceRequirements` as JSON) a resize set the running
/// container to; its spec still has those it was created with.
pub const LABEL_RESOURCES: &str = "io.outpost.container.resources";
/// containerd's type of a task update's resources.
const RESOURCES_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources";

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container {id}: {step}")]
    Containerd {
        id: String,
        step: &'static str,
        #[source]
        source: tonic::Status,
    },
    #[error("container {id}: cannot encode its OCI runtime spec")]
    Spec {
        id: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A call containerd could not take is tried again 0.2 s to 5 s apart, for 5 min.
const UNREACHABLE_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
const UNREACHABLE_RETRY_FOR: Duration = Duration::from_secs(300);

/// Calls `call` until it succeeds or fails for another reason than an unreachable
/// containerd (restarting, or the connection broken under the call), trying again with
/// backoff for up to 5 min: what must not be given up while containerd restarts (a
/// removal given up leaves a container with no pod behind it).
pub async fn retry_while_unreachable<T, F, Fut>(what: &str, mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let started = tokio::time::Instant::now();
    let mut backoff = UNREACHABLE_BACKOFF;
    loop {
        match call().await {
            Err(e) if e.is_unreachable() && started.elapsed() < UNREACHABLE_RETRY_FOR => {
                let delay = backoff.next_delay(fastrand::f64());
                tracing::warn!(error = %outpost_core::error_chain::describe(&e), retry_in = ?delay, "cannot {what}: containerd is unreachable");
                tokio::time::sleep(delay).await;
            }
            result => return result,
        }
    }
}

impl Error {
    /// containerd could not be reached (it is restarting, or the connection broke under
    /// the call): the same call may succeed once it is back.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Containerd { source, .. } if super::containerd::unreachable(source))
    }
}

/// What a new container is made of.
#[derive(Debug)]
pub struct NewContainer<'a> {
    pub id: &'a str,
    pub image: &'a str,
    /// The committed snapshot its rootfs is prepared on.
    pub parent_snapshot: &'a str,
    pub spec: &'a Spec,
    pub labels: HashMap<String, String>,
    /// Its stdio: the `binary://` logger's URI, or its FIFOs.
    pub stdio: &'a crate::stdio::Stdio,
    /// runc manages its cgroup through systemd (`--cgroup-driver systemd`: its
    /// `cgroupsPath` is `slice:prefix:name`).
    pub systemd_cgroup: bool,
    /// The runtime handler of its pod (D5): the shim and its options (`BinaryName`...).
    pub handler: &'a Handler,
}

/// A container Outpost made, as containerd lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub id: String,
    pub labels: HashMap<String, String>,
    pub created_at: Option<prost_types::Timestamp>,
    /// The image it was made from (its name in containerd).
    pub image: String,
    /// Its task, if it has one.
    pub task: Option<Process>,
}

impl Listed {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    pub fn task_status(&self) -> Option<Status> {
        self.task.as_ref().map(|t| t.status())
    }
}

/// Creates the container record, its snapshot and its task (created, not started);
/// returns the task's pid. On failure, what was made is removed again.
pub async fn create(containerd: &Containerd, new: &NewContainer<'_>) -> Result<u32> {
    let id = new.id;
    let spec =
        serde_json::to_vec(new.spec).map_err(|source| Error::Spec { id: id.to_owned(), source })?;
    let container = Container {
        id: id.to_owned(),
        labels: new.labels.clone(),
        image: new.image.to_owned(),
        runtime: Some(new.handler.runtime(new.systemd_cgroup)),
        spec: Some(prost_types::Any { type_url: SPEC_TYPE_URL.to_owned(), value: spec }),
        snapshotter: SNAPSHOTTER.to_owned(),
        snapshot_key: id.to_owned(),
        ..Container::default()
    };
    containerd
        .containers()
        .create(CreateContainerRequest { container: Some(container) })
        .await
        .map_err(|source| failed(id, "creating the container record", source))?;
    let result = create_task(containerd, new).await;
    if result.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = remove(containerd, id).await;
    }
    result
}

async fn create_task(containerd: &Containerd, new: &NewContainer<'_>) -> Result<u32> {
    let id = new.id;
    let mounts = containerd
        .snapshots()
        .prepare(PrepareSnapshotRequest {
            snapshotter: SNAPSHOTTER.to_owned(),
            key: id.to_owned(),
            parent: new.parent_snapshot.to_owned(),
            labels: HashMap::new(),
        })
        .await
        .map_err(|source| failed(id, "preparing the rootfs snapshot", source))?
        .into_inner()
        .mounts;
    // A container with a terminal (`tty: true`) has the shim make a console; its output,
    // stdout and stderr alike, goes to the logger as stdout (as with containerd's CRI).
    let terminal = new.spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false);
    let request = CreateTaskRequest {
        container_id: id.to_owned(),
        rootfs: mounts,
        stdin: new.stdio.stdin.clone(),
        stdout: new.stdio.stdout.clone(),
        stderr: new.stdio.stderr.clone(),
        terminal,
        ..CreateTaskRequest::default()
    };
    let created = containerd
        .tasks()
        .create(request)
        .await
        .map_err(|source| failed(id, "creating the task (runc create)", source))?
        .into_inner();
    Ok(created.pid)
}

/// Starts the created task.
pub async fn start(containerd: &Containerd, id: &str) -> Result<u32> {
    let request = StartRequest { container_id: id.to_owned(), exec_id: String::new() };
    let started = containerd
        .tasks()
        .start(request)
        .await
        .map_err(|source| failed(id, "starting the task", source))?
        .into_inner();
    Ok(started.pid)
}

/// Closes the shim's own writer on the task's stdin (`Tasks.CloseIO`): once the last
/// attach writing to it ends, the container reads end-of-file (`stdinOnce`).
pub async fn close_stdin(containerd: &Containerd, id: &str) -> Result<()> {
    let request =
        CloseIoRequest { container_id: id.to_owned(), exec_id: String::new(), stdin: true };
    match containerd.tasks().close_io(request).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        Err(source) => Err(failed(id, "closing the task's stdin", source)),
    }
}

/// Sends `signal` to the task's init process (`all`: to every process in it), in its turn
/// in a shared shim ([`Containerd::in_shim`]). A task that is already gone is not an error.
pub async fn kill(containerd: &Containerd, id: &str, signal: i32, all: bool) -> Result<()> {
    let request = KillRequest {
        container_id: id.to_owned(),
        exec_id: String::new(),
        signal: u32::try_from(signal).unwrap_or(9),
        all,
    };
    match containerd.in_shim(containerd.tasks().kill(request)).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        // runc reports a stopped task as "process already finished".
        Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(()),
        Err(source) => Err(failed(id, "signalling the task", source)),
    }
}

/// K6: sets the running task's cgroup limits to `resources` (containerd's `UpdateTask`,
/// runc's `update`), without a restart; what `resources` leaves unset stays.
pub async fn update_resources(
    containerd: &Containerd,
    id: &str,
    resources: &oci_spec::runtime::LinuxResources,
) -> Result<()> {
    let value = serde_json::to_vec(resources).unwrap_or_default();
    let request = UpdateTaskRequest {
        container_id: id.to_owned(),
        resources: Some(prost_types::Any { type_url: RESOURCES_TYPE_URL.to_owned(), value }),
        ..UpdateTaskRequest::default()
    };
    containerd
        .in_shim(containerd.tasks().update(request))
        .await
        .map_err(|source| failed(id, "updating the task's resources (runc update)", source))?;
    Ok(())
}

/// The task's process as containerd sees it (`None`: no task).
pub async fn task(containerd: &Containerd, id: &str) -> Result<Option<Process>> {
    let request = GetRequest { container_id: id.to_owned(), exec_id: String::new() };
    match containerd.tasks().get(request).await {
        Ok(response) => Ok(response.into_inner().process),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
        Err(source) => Err(failed(id, "looking up the task", source)),
    }
}

/// Deletes a stopped task (reaping it), in its turn in a shared shim
/// ([`Containerd::in_shim`]); returns its exit status and time if it had one.
pub async fn delete_task(
    containerd: &Containerd,
    id: &str,
) -> Result<Option<(u32, Option<prost_types::Timestamp>)>> {
    let request = DeleteTaskRequest { container_id: id.to_owned() };
    match containerd.in_shim(containerd.tasks().delete(request)).await {
        Ok(response) => {
            let deleted = response.into_inner();
            Ok(Some((deleted.exit_status, deleted.exited_at)))
        }
        Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
        // Deleted meanwhile by someone else (the reaper of an exit the kernel reported
        // and the removal of the container a restart replaces may race): its shim may
        // answer "ttrpc: closed" instead of NotFound.
        Err(source) => match task(containerd, id).await {
            Ok(None) => Ok(None),
            _ => Err(failed(id, "deleting the task", source)),
        },
    }
}

/// Waits until the task's init process has exited as containerd sees it (at most
/// `limit`); true once it has (or there is no task). The kernel reports an exit before
/// the shim has reaped the process, and containerd deletes only stopped tasks.
pub async fn wait_stopped(containerd: &Containerd, id: &str, limit: std::time::Duration) -> bool {
    let request = WaitRequest { container_id: id.to_owned(), exec_id: String::new() };
    let mut tasks = containerd.tasks();
    match tokio::time::timeout(limit, tasks.wait(request)).await {
        Ok(Ok(_)) => true,
        Ok(Err(s)) => s.code() == tonic::Code::NotFound,
        Err(_) => false,
    }
}

/// Deletes the task once containerd has seen it stop (waiting at most `limit`).
pub async fn reap(
    containerd: &Containerd,
    id: &str,
    limit: std::time::Duration,
) -> Result<Option<(u32, Option<prost_types::Timestamp>)>> {
    wait_stopped(containerd, id, limit).await;
    delete_task(containerd, id).await
}

/// Adds `labels` to the container record.
pub async fn label(
    containerd: &Containerd,
    id: &str,
    labels: HashMap<String, String>,
) -> Result<()> {
    let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
    let request = UpdateContainerRequest {
        container: Some(Container { id: id.to_owned(), labels, ..Container::default() }),
        update_mask: Some(FieldMask { paths }),
    };
    containerd
        .containers()
        .update(request)
        .await
        .map_err(|source| failed(id, "labelling the container", source))?;
    Ok(())
}

/// Removes the task (killing it if it still runs), the container record and its
/// snapshot; whatever is already gone is skipped.
pub async fn remove(containerd: &Containerd, id: &str) -> Result<()> {
    if let Some(process) = task(containerd, id).await?
        && process.status() != Status::Stopped
    {
        // A task whose process just exited (the kernel said so first) may refuse the
        // signal: waiting for it to stop is what matters.
        if let Err(e) = kill(containerd, id, libc::SIGKILL, true).await {
            tracing::debug!(container_id = id, error = %outpost_core::error_chain::describe(&e), "cannot SIGKILL the task before removing it");
        }
    }
    reap(containerd, id, REAP_WAIT).await?;
    match containerd.containers().delete(DeleteContainerRequest { id: id.to_owned() }).await {
        Ok(_) => {}
        Err(s) if s.code() == tonic::Code::NotFound => {}
        Err(source) => return Err(failed(id, "deleting the container record", source)),
    }
    let request = RemoveSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: id.to_owned() };
    match containerd.snapshots().remove(request).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        Err(source) => Err(failed(id, "removing the rootfs snapshot", source)),
    }
}

/// The run of container `id` (its restart count label, as its log file `<n>.log` is
/// named); `None`: containerd has no such container.
pub async fn run_of(containerd: &Containerd, id: &str) -> Result<Option<u32>> {
    let request = GetContainerRequest { id: id.to_owned() };
    let container = match containerd.containers().get(request).await {
        Ok(response) => response.into_inner().container,
        Err(s) if s.code() == tonic::Code::NotFound => return Ok(None),
        Err(source) => return Err(failed(id, "reading the container record", source)),
    };
    Ok(container
        .map(|c| c.labels.get(LABEL_RESTART_COUNT).and_then(|n| n.parse().ok()).unwrap_or(0)))
}

/// Every container Outpost made (those carrying a pod UID label), with its task.
pub async fn list(containerd: &Containerd) -> Result<Vec<Listed>> {
    let filter = format!("labels.\"{LABEL_POD_UID}\"");
    let containers = containerd
        .containers()
        .list(ListContainersRequest { filters: vec![filter] })
        .await
        .map_err(|source| failed("*", "listing containers", source))?
        .into_inner()
        .containers;
    let mut tasks: HashMap<String, Process> = containerd
        .tasks()
        .list(ListTasksRequest { filter: String::new() })
        .await
        .map_err(|source| failed("*", "listing tasks", source))?
        .into_inner()
        .tasks
        .into_iter()
        .map(|p| (p.id.clone(), p))
        .collect();
    Ok(containers
        .into_iter()
        .map(|c| Listed {
            task: tasks.remove(&c.id),
            id: c.id,
            labels: c.labels,
            created_at: c.created_at,
            image: c.image,
        })
        .collect())
}

fn failed(id: &str, step: &'static str, source: tonic::Status) -> Error {
    Error::Containerd { id: id.to_owned(), step, source }
}
