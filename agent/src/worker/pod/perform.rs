//! Performing one action of the pod worker's core through the runtime; results become
//! inputs of the next step.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use outpost_core::pod_worker::{
    Action, Exit, ExitSource, Input, Metric, StartFailure, Started, StopSignal, WaitingReason,
    exit_code,
};

use super::PodWorker;
use crate::apiserver::events::{EventType, pod_ref, reason};
use crate::error_chain::describe;
use crate::runtime::container;
use crate::worker::pod_runtime::{NewContainer, PodRuntime, SetUp, TaskState};

/// The exit code reported for a container whose task is gone without a word (as
/// kubelet's ContainerStatusUnknown: 137).
const UNKNOWN_EXIT: i32 = 137;
/// How long a replaced container's events still reach the worker: the kernel and
/// containerd report an exit milliseconds apart.
const LATE_EXIT_WORD: Duration = Duration::from_secs(1);

impl<R: PodRuntime> PodWorker<R> {
    pub(super) async fn perform(&mut self, action: Action, inputs: &mut VecDeque<Input>) {
        let shared = self.shared.clone();
        let runtime = &shared.runtime;
        match action {
            Action::TrackPod { uid } => shared.ebpf.track_pod(&uid),
            Action::ForgetPod { uid } => shared.ebpf.forget_pod(&uid),
            Action::Watch { container_id } => shared.routes.add(&container_id, &self.outbox),
            Action::SetUpSandbox { pod } => match runtime.set_up_sandbox(&pod).await {
                Ok(SetUp { sandbox, ips, fresh }) => {
                    self.sandbox = Some((outpost_core::pod::uid(&pod).to_owned(), sandbox));
                    inputs.push_back(Input::SandboxReady { ips, fresh });
                }
                Err(problem) => inputs.push_back(Input::SandboxFailed(problem)),
            },
            Action::RefreshVolumes { pod } => runtime.refresh_volumes(&pod).await,
            Action::ReleaseVolumes { uid } => runtime.release_volumes(&uid).await,
            Action::TearDownSandbox { uid } => {
                if self.sandbox.as_ref().is_some_and(|(owner, _)| *owner == uid) {
                    self.sandbox = None;
                }
                runtime.tear_down_sandbox(&uid).await;
                // Said once it is done: tests and operators wait for this line.
                tracing::info!(pod.uid = uid, "pod sandbox removed");
            }
            Action::StartContainer { pod, container, restart_count, hash, target } => {
                let run = Run { restart_count, hash: &hash, target: target.as_deref() };
                let result = self.start(&pod, &container, run).await;
                inputs.push_back(match result {
                    Ok(started) => Input::Started { container, started },
                    Err(failure) => Input::StartFailed { container, failure },
                });
            }
            Action::Signal { container_ids, signal } => self.signal(&container_ids, signal).await,
            Action::Probe { pod, container, container_id, kind, handler, timeout } => {
                self.probe(&pod, container, container_id, kind, handler, timeout);
            }
            Action::RunHook { pod, container, container_id, hook, handler, timeout } => {
                self.run_hook(&pod, &container, container_id, hook, handler, timeout);
            }
            Action::CheckExited { container_ids } => self.check_exited(container_ids, inputs).await,
            Action::DeleteTask { container_id, reap } => self.exited.push((container_id, reap)),
            Action::ReadTerminationMessage { pod, container, container_id, exit_code } => {
                let spec = outpost_core::ephemeral::any_container(&pod, &container);
                let Some(spec) = spec.as_deref() else { return };
                let message =
                    runtime.termination_message(&pod, spec, &container_id, exit_code).await;
                if let Some(message) = message {
                    inputs.push_back(Input::TerminationMessage { container_id, message });
                }
            }
            Action::RecordExit { container_id, terminated } => {
                if let Err(e) = runtime.record_exit(&container_id, &terminated).await {
                    tracing::debug!(container_id, error = %describe(&e), "cannot label the exited container");
                }
            }
            Action::KeepDead { container_id } => {
                // The garbage collector's from now on (G1). Its events stay routed here a
                // moment: the other side's late word about its exit (the kernel's signal
                // or OOM victim) still counts.
                self.abandon_runs(&container_id);
                shared.gc.collect_containers_now();
                let shared = shared.clone();
                self.cleanup.spawn(async move {
                    tokio::time::sleep(LATE_EXIT_WORD).await;
                    shared.routes.remove(&container_id);
                });
            }
            Action::RemoveContainer { container_id, background } => {
                self.remove_container(container_id, background).await;
            }
            Action::Event { pod, container, kind, reason, message } => {
                shared.events.emit(&pod_ref(&pod, container.as_deref()), kind, reason, message);
            }
            Action::Count(Metric::ContainerRestarted { source }) => {
                shared.metrics.container_restarted(source);
            }
            Action::Count(Metric::PodStarted { source, latency }) => {
                shared.metrics.pod_started(source, latency);
            }
            Action::RemoveStatus { uid } => shared.statuses.remove(&uid),
            Action::ResizeContainers { pod, actual, containers } => {
                let (applied, error) = runtime.resize(&pod, &actual, &containers).await;
                inputs.push_back(Input::Resized { applied, error });
            }
        }
    }

    /// Sends `signal` to each container (a kill abandons its hooks and probes).
    async fn signal(&mut self, container_ids: &[String], signal: StopSignal) {
        let shared = self.shared.clone();
        let runtime = &shared.runtime;
        for id in container_ids {
            if signal == StopSignal::Kill {
                // Its hooks and probes are abandoned with it.
                self.abandon_runs(id);
            }
            if let Err(e) = runtime.kill(id, signal).await {
                let signal = match signal {
                    StopSignal::Term => "SIGTERM",
                    StopSignal::Kill => "SIGKILL",
                };
                tracing::warn!(container_id = id, error = %describe(&e), "cannot send {signal}");
            }
        }
    }

    /// Whether each container's task exited, as containerd says (a lost event's stand-in).
    async fn check_exited(&mut self, container_ids: Vec<String>, inputs: &mut VecDeque<Input>) {
        let runtime = &self.shared.runtime;
        for id in container_ids {
            let (exit_code, finished_at) = match runtime.task(&id).await {
                Ok(TaskState::Running) => continue,
                Ok(TaskState::Exited { exit_status, exited_at }) => {
                    (exit_code(exit_status), exited_at)
                }
                Ok(TaskState::Missing) => (UNKNOWN_EXIT, None),
                // Looked at again when containerd is back (Resync).
                Err(e) if e.is_unreachable() => {
                    tracing::warn!(container_id = id, error = %describe(&e), "cannot look up the task: containerd is unreachable");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(container_id = id, error = %describe(&e), "cannot look up the task; taking it as exited");
                    (UNKNOWN_EXIT, None)
                }
            };
            inputs.push_back(Input::Exited(Exit {
                container_id: id,
                exit_code,
                finished_at,
                signal: None,
                by: ExitSource::Containerd,
            }));
        }
    }

    /// Deletes the exited tasks of the step just performed, in the background: a
    /// restart's replacement is created and started first (B3, issue 53). Deleting the
    /// old task runs `runc delete` in the pod's shim and writes containerd's metadata;
    /// side by side with the new container's snapshot and `runc create` it made them
    /// take half as long again. Their events stay routed here: the other side's late
    /// word about the exit (the kernel's signal or OOM victim) still counts. Then the
    /// garbage collector looks: the container is dead now, and the one before it may be
    /// one too many (G1).
    pub(super) fn delete_exited_tasks(&mut self) {
        for (container_id, reap) in self.exited.drain(..) {
            let shared = self.shared.clone();
            self.cleanup.spawn(async move {
                // `reap`: the kernel reported the exit, and containerd may not have
                // reaped the process yet: deleted once it has.
                if let Err(e) = shared.runtime.delete_task(&container_id, reap).await {
                    tracing::warn!(container_id, error = %describe(&e), "cannot delete the exited task");
                }
                shared.gc.collect_containers_now();
            });
        }
    }

    /// Removes a container, in the background when asked; its events stay routed here
    /// until it is gone.
    async fn remove_container(&mut self, container_id: String, background: bool) {
        let shared = self.shared.clone();
        let runtime = &shared.runtime;
        self.abandon_runs(&container_id);
        // Routed here until it is gone (late words about its exit).
        if background {
            let shared = shared.clone();
            self.cleanup.spawn(async move {
                remove(&shared.runtime, &container_id).await;
                shared.routes.remove(&container_id);
            });
        } else {
            remove(runtime, &container_id).await;
            shared.routes.remove(&container_id);
        }
    }

    /// Creates and starts `container` of `pod` as restart number `restart_count`; its task
    /// events are routed here from before it starts.
    async fn start(
        &self,
        pod: &Arc<Pod>,
        container: &str,
        run: Run<'_>,
    ) -> Result<Started, StartFailure> {
        let Run { restart_count, hash, target } = run;
        let runtime = &self.shared.runtime;
        let events = &self.shared.events;
        // X1: an ephemeral container runs as a container of its fields.
        let spec = outpost_core::ephemeral::any_container(pod, container);
        let (Some(spec), Some((_, sandbox))) = (spec.as_deref(), &self.sandbox) else {
            let message = format!("container {container} has no spec or its pod no sandbox");
            return Err(StartFailure::new(WaitingReason::CreateContainerError, message));
        };
        let object = pod_ref(pod, Some(container));
        let image = runtime.ensure_image(pod, spec).await?;
        let new = NewContainer {
            pod,
            sandbox,
            container: spec,
            image: &image,
            restart_count,
            hash,
            target,
        };
        let created = runtime.create_container(new).await?;
        events.emit(
            &object,
            EventType::Normal,
            reason::CREATED,
            format!("Created container: {container}"),
        );
        self.shared.routes.add(&created.id, &self.outbox);
        if let Err(failure) = runtime.start_container(&created.id).await {
            self.shared.routes.remove(&created.id);
            // Retried while containerd is unreachable: a start whose answer was lost with
            // containerd may have left the task running, with no pod to stop it.
            remove(runtime, &created.id).await;
            return Err(failure);
        }
        events.emit(
            &object,
            EventType::Normal,
            reason::STARTED,
            format!("Started container {container}"),
        );
        Ok(Started { id: created.id, image_id: created.image_id, started_at: created.started_at })
    }
}

/// Which run of a container a start makes.
struct Run<'a> {
    restart_count: u32,
    hash: &'a str,
    /// X1: the container whose process namespace an ephemeral container joins.
    target: Option<&'a str>,
}

/// Removes a container (killing its task first if it runs), also across a containerd
/// restart ([`container::retry_while_unreachable`]): given up, the container would run on
/// with no pod behind it until the next start's sweep.
async fn remove<R: PodRuntime>(runtime: &R, container_id: &str) {
    let removed = container::retry_while_unreachable("remove a container", || {
        runtime.remove_container(container_id)
    })
    .await;
    if let Err(e) = removed {
        tracing::warn!(container_id, error = %describe(&e), "cannot remove container");
    }
}
