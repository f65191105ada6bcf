//! One pod worker's executor: it turns inbox messages into inputs of the pure
//! [`outpost_core::pod_worker::PodWorker`], performs the actions each step returns
//! through a [`PodRuntime`], feeds their results back as inputs, sleeps until the next
//! wake-up, and publishes the pod's status after every round.

mod perform;
mod run;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{self, Exit, ExitSource, Found, Input, Now};
use tokio::task::{AbortHandle, JoinSet};
use tracing::Instrument as _;

use super::pod_runtime::PodRuntime;
use super::{Eviction, Inbox, Message, Outbox, Shared};
use crate::ebpf::Observed;
use crate::ebpf::audit::{Entry, Kind};
use crate::ebpf::clock::wall_time;
use crate::ebpf::records::{self, KernelEvent};
use crate::runtime::events::TaskEvent;

pub(super) struct PodWorker<R: PodRuntime> {
    shared: Arc<Shared<R>>,
    outbox: Outbox,
    core: pod_worker::PodWorker,
    /// The current pod's sandbox, by pod UID.
    sandbox: Option<(String, R::Sandbox)>,
    /// Work done off the worker's path (removing a replaced container, reaping a task
    /// the kernel reported exited), awaited before the worker ends.
    cleanup: JoinSet<()>,
    /// Exited tasks to delete once the step's actions are done: off the path of the
    /// replacement's start, which they would slow down (module `perform`).
    exited: Vec<(String, bool)>,
    /// Probes and hooks running; each ends in an input. Abandoned when the worker ends.
    runs: JoinSet<Input>,
    /// The runs of each container, abandoned when it is killed or removed.
    runs_of: HashMap<String, Vec<AbortHandle>>,
    /// The pod UID recorded on the worker's span: recorded again only when it changes
    /// (each record adds the field to the span's formatted lines once more).
    span_uid: String,
}

impl<R: PodRuntime> std::fmt::Debug for PodWorker<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodWorker").field("core", &self.core).finish_non_exhaustive()
    }
}

/// Why the worker loop woke.
enum Wake {
    Message(Message),
    Timer,
    CleanupDone,
    /// A probe or hook finished (`None`: abandoned).
    Ran(Option<Input>),
}

impl<R: PodRuntime> PodWorker<R> {
    pub(super) fn new(
        shared: Arc<Shared<R>>,
        name: FullName,
        outbox: Outbox,
        found: Vec<Found>,
    ) -> PodWorker<R> {
        let core = pod_worker::PodWorker::new(name, shared.settings.clone(), found);
        PodWorker {
            shared,
            outbox,
            core,
            sandbox: None,
            cleanup: JoinSet::new(),
            exited: Vec::new(),
            runs: JoinSet::new(),
            runs_of: HashMap::new(),
            span_uid: String::new(),
        }
    }

    /// Runs until nothing is desired and nothing is left running, the node shut down, or
    /// the agent leaves; hands the inbox back (messages may have arrived meanwhile).
    pub(super) fn run(self, inbox: Inbox) -> impl Future<Output = Inbox> + use<R> {
        let name = self.core.name();
        // The pod's UID is recorded once a desired pod (or an adopted one) gives it; one
        // worker serves a full name, so a replaced pod's lines carry the new UID from then.
        let span = tracing::info_span!(
            "pod",
            pod.namespace = %name.namespace,
            pod.name = %name.name,
            pod.uid = tracing::field::Empty
        );
        self.serve(inbox).instrument(span)
    }

    /// [`PodWorker::run`]'s loop. Its future is what a pod holds while it runs (B5): the
    /// worker, the inbox and the wait on them; each round's work is boxed for its time.
    async fn serve(mut self, mut inbox: Inbox) -> Inbox {
        let mut wake_at: Option<std::time::Instant> = None;
        loop {
            let wake = tokio::select! {
                m = inbox.recv() => match m {
                    Some(m) => Wake::Message(m),
                    None => break,
                },
                () = sleep_until(wake_at), if wake_at.is_some() => Wake::Timer,
                Some(_) = self.cleanup.join_next(), if !self.cleanup.is_empty() => Wake::CleanupDone,
                Some(ran) = self.runs.join_next(), if !self.runs.is_empty() => Wake::Ran(ran.ok()),
            };
            let mut inputs = VecDeque::new();
            let mut leave = false;
            match wake {
                Wake::Message(message) => leave |= self.take(message, &mut inputs),
                Wake::Timer => inputs.push_back(Input::Tick),
                Wake::CleanupDone | Wake::Ran(None) => continue,
                Wake::Ran(Some(input)) => inputs.push_back(input),
            }
            while let Some(Ok(input)) = self.runs.try_join_next() {
                inputs.push_back(input);
            }
            while let Ok(message) = inbox.try_recv() {
                leave |= self.take(message, &mut inputs);
            }
            if let Some(wake) = Box::pin(self.round(inputs)).await {
                wake_at = wake;
            }
            if leave || self.core.is_done() {
                break;
            }
        }
        while self.cleanup.join_next().await.is_some() {}
        inbox
    }

    /// Steps the core through `inputs` and every result they lead to; publishes the
    /// status; returns the next wake-up (`None` if no step ran).
    async fn round(&mut self, mut inputs: VecDeque<Input>) -> Option<Option<std::time::Instant>> {
        let mut wake = None;
        while let Some(input) = inputs.pop_front() {
            let step = self.core.step(input, now());
            for action in step.actions {
                self.perform(action, &mut inputs).await;
            }
            self.delete_exited_tasks();
            wake = Some(step.wake);
        }
        // Clock: the local wall clock: a status records when things happened on this node.
        if let Some((uid, status)) = self.core.status(Timestamp::now()) {
            if self.span_uid != uid {
                tracing::Span::current().record("pod.uid", uid);
                uid.clone_into(&mut self.span_uid);
            }
            self.shared.statuses.set(uid, status);
        }
        wake
    }

    /// The inputs a message stands for; true if the agent leaves (the worker ends, its
    /// containers keep running for the next agent to adopt).
    fn take(&self, message: Message, inputs: &mut VecDeque<Input>) -> bool {
        match message {
            Message::Desired(desired) => inputs.push_back(Input::Desired(desired.map(|d| *d))),
            Message::Task(event) => inputs.push_back(task_input(*event)),
            Message::Kernel(observed) => {
                self.audit(&observed);
                inputs.extend(kernel_input(*observed));
            }
            Message::ObjectsChanged => {
                let answers = self.core.pod().map(|pod| self.shared.objects.answers(pod));
                inputs.push_back(Input::ObjectsChanged(answers.unwrap_or_default()));
            }
            Message::Evict(eviction) => {
                let Eviction { uid, message, grace, .. } = *eviction;
                inputs.push_back(Input::Evict { uid, message, grace });
            }
            Message::Preempt { uid } => inputs.push_back(Input::Preempt { uid }),
            Message::Shutdown { grace: None } => inputs.push_back(Input::Shutdown),
            Message::Shutdown { grace: Some(grace) } => {
                inputs.push_back(Input::ShutdownWithin { grace });
            }
            Message::Leave => return true,
        }
        false
    }

    /// Adds an exec or exit the kernel saw to the pod's exec audit log.
    fn audit(&self, observed: &Observed) {
        if self.core.uid() != Some(observed.pod_uid.as_str()) {
            return;
        }
        let container =
            self.core.container_name(&observed.container_id).unwrap_or_default().to_owned();
        let task = observed.event.task();
        let base = Entry {
            kind: Kind::Exec,
            time: wall_time(task.ktime_ns).to_string(),
            container,
            container_id: observed.container_id.clone(),
            pid: task.tgid,
            ns_pid: task.ns_tgid,
            comm: task.comm.clone(),
            ppid: None,
            uid: None,
            filename: None,
            argv: Vec::new(),
            exit_code: None,
            signal: None,
        };
        let entry = match &observed.event {
            KernelEvent::Exec { uid, ppid, filename, argv, .. } => Entry {
                ppid: Some(*ppid),
                uid: Some(*uid),
                filename: Some(filename.clone()),
                argv: argv.clone(),
                ..base
            },
            KernelEvent::Exit { exit_code, .. } => {
                let status = records::exit_status(*exit_code);
                Entry {
                    kind: Kind::Exit,
                    exit_code: Some(status.code),
                    signal: status.signal,
                    ..base
                }
            }
            KernelEvent::OomKill { .. } => return,
        };
        let name = self.core.name();
        self.shared.ebpf.record(&observed.pod_uid, &name.namespace, &name.name, entry);
    }
}

/// What containerd's word on a task means for the worker.
fn task_input(event: TaskEvent) -> Input {
    match event {
        TaskEvent::Exit { container_id, exit_status, exited_at } => Input::Exited(Exit {
            container_id,
            exit_code: pod_worker::exit_code(exit_status),
            finished_at: exited_at,
            signal: None,
            by: ExitSource::Containerd,
        }),
        TaskEvent::Oom { container_id } => Input::Oom { container_id, victim: None },
        TaskEvent::Resync => Input::Resync,
    }
}

/// What the kernel's record means for the worker: the exit of a container's init (pid 1
/// of its pid namespace: hostPID containers are left to containerd), or the OOM killer's
/// victim. Execs only go to the audit log.
fn kernel_input(observed: Observed) -> Option<Input> {
    match observed.event {
        KernelEvent::Exit { task, exit_code } if task.ns_tgid == 1 => {
            let status = records::exit_status(exit_code);
            Some(Input::Exited(Exit {
                container_id: observed.container_id,
                exit_code: pod_worker::exit_code(status.code),
                finished_at: Some(wall_time(task.ktime_ns)),
                signal: status.signal.and_then(|s| i32::try_from(s).ok()),
                by: ExitSource::Kernel,
            }))
        }
        KernelEvent::OomKill { task, .. } => Some(Input::Oom {
            container_id: observed.container_id,
            victim: Some(format!("pid {} ({})", task.tgid, task.comm)),
        }),
        KernelEvent::Exec { .. } | KernelEvent::Exit { .. } => None,
    }
}

/// The time now, as tokio's clock has it (paused in tests).
fn now() -> Now {
    // Clock: both: `at` (monotonic) for every wait and backoff, `wall` only for the times a
    // status records.
    Now { at: tokio::time::Instant::now().into_std(), wall: Timestamp::now() }
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
