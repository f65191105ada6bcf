//! The seam between the pod workers and the container runtime: what each worker's
//! executor asks of it, and what the dispatcher does (adoption, containerd's task events,
//! the orphans' sandboxes). [`crate::worker::containerd::Pods`] is the real thing
//! (containerd, CNI, the pod's namespaces and files); the unit tests drive the executor
//! and the dispatcher with a recording fake.

use std::collections::HashSet;
use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{
    Found, ResizeContainer, SandboxProblem, StartFailure, StopSignal, Terminated,
};

use crate::runtime::container;
use crate::runtime::events::TaskEvent;
use crate::runtime::exec::{self, ExecOutput};

/// A container to create: which pod, sandbox, spec and image, which run of it.
#[derive(Debug)]
pub struct NewContainer<'a, S, I> {
    pub pod: &'a Pod,
    pub sandbox: &'a S,
    pub container: &'a Container,
    pub image: &'a I,
    pub restart_count: u32,
    /// The container spec's hash (its label, for adoption).
    pub hash: &'a str,
    /// X1: an ephemeral container's target, the running container (by id) whose
    /// process namespace it joins.
    pub target: Option<&'a str>,
}

/// A pod's sandbox, set up.
#[derive(Debug)]
pub struct SetUp<S> {
    pub sandbox: S,
    /// The pod's addresses.
    pub ips: Vec<IpAddr>,
    /// Made anew, not found as an earlier run left it.
    pub fresh: bool,
}

/// A created container (its task made, not started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub id: String,
    /// The image's digest (`status.containerStatuses[].imageID`).
    pub image_id: String,
    /// Recorded in its labels as the start time.
    pub started_at: Timestamp,
}

/// A container's task as the runtime sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Running,
    /// Stopped (or created, paused): not running.
    Exited {
        exit_status: u32,
        exited_at: Option<Timestamp>,
    },
    /// No task (never started, or deleted).
    Missing,
}

/// What the pod workers need of the container runtime. Every call names its pod or
/// container; failures that the worker only logs come back as [`container::Error`].
pub trait PodRuntime: Send + Sync + 'static {
    /// What the pod's containers join (namespaces, network, files).
    type Sandbox: Send + Sync + 'static;
    /// A resolved image.
    type Image: Send + Sync + 'static;

    /// Creates (or finds) the pod's sandbox.
    fn set_up_sandbox(
        &self,
        pod: &Pod,
    ) -> impl Future<Output = Result<SetUp<Self::Sandbox>, SandboxProblem>> + Send;

    /// Writes the pod's configMap, secret, downwardAPI and projected volumes again from
    /// the objects as they are now (V1), if its sandbox is set up; a failure is logged
    /// and told in an Event.
    fn refresh_volumes(&self, pod: &Pod) -> impl Future<Output = ()> + Send;

    /// Removes the emptyDir volumes of the finished pod `uid` (kubelet tears down a
    /// terminated pod's volumes); a failure is logged.
    fn release_volumes(&self, uid: &str) -> impl Future<Output = ()> + Send;

    /// Removes everything [`PodRuntime::set_up_sandbox`] made for the pod `uid`.
    fn tear_down_sandbox(&self, uid: &str) -> impl Future<Output = ()> + Send;

    /// The container's image, present or pulled by its imagePullPolicy.
    fn ensure_image(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> impl Future<Output = Result<Self::Image, StartFailure>> + Send;

    /// Creates the container and its task (not started).
    fn create_container(
        &self,
        new: NewContainer<'_, Self::Sandbox, Self::Image>,
    ) -> impl Future<Output = Result<Created, StartFailure>> + Send;

    /// Starts a created container's task. On failure the worker removes the container: a
    /// start cut by containerd's death may have started the task all the same.
    fn start_container(&self, id: &str) -> impl Future<Output = Result<(), StartFailure>> + Send;

    fn kill(
        &self,
        id: &str,
        signal: StopSignal,
    ) -> impl Future<Output = Result<(), container::Error>> + Send;

    /// The container's task, now.
    fn task(&self, id: &str) -> impl Future<Output = Result<TaskState, container::Error>> + Send;

    /// Deletes an exited task; with `wait`, first waits (bounded) until the runtime has
    /// seen it stop (the kernel may report an exit before the runtime reaps it).
    fn delete_task(
        &self,
        id: &str,
        wait: bool,
    ) -> impl Future<Output = Result<(), container::Error>> + Send;

    /// Records how the container ended, for a later run that finds it.
    fn record_exit(
        &self,
        id: &str,
        terminated: &Terminated,
    ) -> impl Future<Output = Result<(), container::Error>> + Send;

    /// The termination message the exited container `id` of `pod` left: its
    /// `terminationMessagePath` file, else by `terminationMessagePolicy` the tail of its
    /// log after a failure; `None` when it left none (a failure to read is logged).
    fn termination_message(
        &self,
        pod: &Pod,
        container: &Container,
        id: &str,
        exit_code: i32,
    ) -> impl Future<Output = Option<String>> + Send;

    /// Removes the container: its task (killed if it runs), record and rootfs.
    fn remove_container(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<(), container::Error>> + Send;

    /// Runs `command` in the running container `id` (a probe's or hook's `exec`), killed
    /// past `timeout`.
    fn exec(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> impl Future<Output = Result<ExecOutput, exec::Error>> + Send;

    /// Every container an earlier run left, by pod full name (for adoption).
    fn list(&self)
    -> impl Future<Output = Result<Vec<(FullName, Found)>, container::Error>> + Send;

    /// Delivers the runtime's task events (exits, OOM kills, and a resync after each
    /// resubscription but the first) to `deliver` until it returns false.
    fn watch_events(
        &self,
        deliver: impl FnMut(TaskEvent) -> bool + Send,
    ) -> impl Future<Output = ()> + Send;

    /// K6: resizes the running `containers` of `pod` (with its allocated resources) in
    /// place, and its cgroup, from `actual` (the pod with the resources they run with):
    /// the containers updated (by id, with their new resources), and the error that
    /// stopped it.
    fn resize(
        &self,
        pod: &Pod,
        actual: &Pod,
        containers: &[ResizeContainer],
    ) -> impl Future<Output = (Vec<(String, ResourceRequirements)>, Option<String>)> + Send;

    /// Removes the sandboxes (namespaces, files, cgroups, network) of every pod whose UID
    /// is not in `owned` (M9's orphans).
    fn remove_orphans(&self, owned: &HashSet<String>) -> impl Future<Output = ()> + Send;
}
