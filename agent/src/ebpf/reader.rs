//! The EVENTS ring buffer, read when epoll says it is readable (no polling, no timers):
//! each record parsed, its cgroup resolved to a pod container, and handed on in the
//! order the kernel wrote it (an OOM victim before its exit), straight to whoever acts on
//! it: no queue or task between the ring and the pod worker.

use std::sync::Arc;

use aya::maps::{MapData, RingBuf};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use super::cgroups::Cgroups;
use super::records::{self, KernelEvent};

/// A kernel event of a pod container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub pod_uid: String,
    pub container_id: String,
    pub event: KernelEvent,
}

/// Starts the reader task ("ebpf events"), which hands each event to `deliver`; it runs
/// until aborted.
pub fn spawn(
    ring: RingBuf<MapData>,
    cgroups: Arc<Cgroups>,
    deliver: impl FnMut(Observed) + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let fd = register(ring)?;
    let span = tracing::info_span!("ebpf events");
    Ok(tokio::spawn(read(fd, cgroups, deliver).instrument(span)))
}

/// The only `unsafe` of the BPF side: registering the ring buffer with tokio's reactor.
#[allow(unsafe_code)]
fn register(ring: RingBuf<MapData>) -> std::io::Result<AsyncFd<RingBuf<MapData>>> {
    // SAFETY: the `RingBuf` owns its map's descriptor (through its `MapData`) and closes
    // it only when dropped, and `as_raw_fd` always returns that descriptor: it stays
    // open and the same for as long as the `AsyncFd` holds the ring buffer.
    Ok(unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }?)
}

async fn read(
    mut fd: AsyncFd<RingBuf<MapData>>,
    cgroups: Arc<Cgroups>,
    mut deliver: impl FnMut(Observed),
) {
    let mut batch = Vec::new();
    loop {
        let mut guard = match fd.readable_mut().await {
            Ok(guard) => guard,
            Err(e) => {
                tracing::warn!(error = %e, "cannot wait on the BPF ring buffer; kernel events stop");
                return;
            }
        };
        // Readiness is cleared before draining, not after: a record written after the
        // last one read wakes epoll again (the kernel notifies a consumer that caught
        // up), and clearing after draining could drop that wake-up and leave the record
        // waiting for the next one.
        guard.clear_ready();
        let ring = guard.get_inner_mut();
        while let Some(item) = ring.next() {
            match records::parse(&item) {
                Ok(event) => batch.push(event),
                Err(e) => tracing::warn!(error = %e, "skipping a BPF ring buffer record"),
            }
        }
        drop(guard);
        for event in batch.drain(..) {
            if let Some(observed) = resolve(&cgroups, event) {
                deliver(observed);
            }
        }
    }
}

/// The event with its pod and container, if it happened in one.
fn resolve(cgroups: &Cgroups, event: KernelEvent) -> Option<Observed> {
    let task = event.task();
    let Some(owner) = cgroups.resolve(task.cgroup_id) else {
        if matches!(event, KernelEvent::OomKill { .. }) {
            tracing::debug!(
                source = "kernel",
                pid = task.tgid,
                comm = task.comm,
                "OOM kill outside the pods"
            );
        }
        return None;
    };
    let container_id = owner.container_id?;
    match &event {
        KernelEvent::Exit { exit_code, .. } => {
            let status = records::exit_status(*exit_code);
            // A container's init (pid 1 in its pid namespace): the container exits.
            if task.ns_tgid == 1 {
                tracing::info!(
                    source = "kernel",
                    pod.uid = owner.pod_uid,
                    container_id,
                    pid = task.tgid,
                    after_us = super::clock::since_ns(task.ktime_ns).map(|ns| ns / 1000),
                    exit_code = status.code,
                    signal = status.signal,
                    "container init exited"
                );
            } else {
                tracing::debug!(
                    source = "kernel",
                    pod.uid = owner.pod_uid,
                    container_id,
                    pid = task.tgid,
                    ns_pid = task.ns_tgid,
                    comm = task.comm,
                    exit_code = status.code,
                    signal = status.signal,
                    "process exited"
                );
            }
        }
        KernelEvent::OomKill { .. } => tracing::info!(
            source = "kernel",
            pod.uid = owner.pod_uid,
            container_id,
            pid = task.tgid,
            comm = task.comm,
            "the OOM killer chose a pod process"
        ),
        KernelEvent::Exec { filename, .. } => tracing::trace!(
            source = "kernel",
            pod.uid = owner.pod_uid,
            container_id,
            pid = task.tgid,
            filename,
            "process exec"
        ),
    }
    Some(Observed { pod_uid: owner.pod_uid, container_id, event })
}
