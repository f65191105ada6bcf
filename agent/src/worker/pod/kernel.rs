//! What the kernel (eBPF) tells a pod worker about its containers: every exec and exit
//! goes to the pod's exec audit log; the init's exit (pid 1 of the container's pid
//! namespace: hostPID containers are left to containerd) is the container's exit,
//! whichever of the kernel and containerd reports it first; and the OOM killer's victim
//! is named. The kernel's records come in the order it wrote them (a victim before its
//! exit).

use super::super::state::{SlotState, Terminated};
use super::PodWorker;
use crate::ebpf::Observed;
use crate::ebpf::audit::{Entry, Kind};
use crate::ebpf::clock::wall_time;
use crate::ebpf::records::{self, KernelEvent};

/// What the kernel adds to an exit containerd would report.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelExit {
    /// The signal that killed the process.
    pub signal: Option<i32>,
}

impl PodWorker {
    pub(super) async fn kernel(&mut self, observed: Observed) {
        self.audit(&observed);
        match &observed.event {
            KernelEvent::Exit { task, exit_code } if task.ns_tgid == 1 => {
                let status = records::exit_status(*exit_code);
                let signal = status.signal.and_then(|s| i32::try_from(s).ok());
                let at = wall_time(task.ktime_ns);
                let id = &observed.container_id;
                self.exited(id, status.code, Some(at), Some(KernelExit { signal })).await;
                // containerd's exit came first (a busy agent reads both at once): the
                // kernel still knows the signal.
                if let Some(t) = self.terminated_mut(id)
                    && t.signal.is_none()
                {
                    t.signal = signal;
                }
            }
            KernelEvent::OomKill { task, .. } => {
                let victim = format!("pid {} ({})", task.tgid, task.comm);
                if let Some(slot) = self.slot_mut(&observed.container_id)
                    && slot.is_running()
                {
                    slot.oom_killed = true;
                    slot.oom_victim = Some(victim);
                } else if let Some(t) = self.terminated_mut(&observed.container_id)
                    && t.message.is_none()
                {
                    // containerd's exit came first: the OOM kill still names the reason.
                    "OOMKilled".clone_into(&mut t.reason);
                    t.message = Some(format!("The OOM killer chose {victim}"));
                }
            }
            KernelEvent::Exec { .. } | KernelEvent::Exit { .. } => {}
        }
    }

    /// How the container `id` ended, if its slot knows.
    fn terminated_mut(&mut self, id: &str) -> Option<&mut Terminated> {
        let current = self.current.as_mut()?;
        current.slots.iter_mut().find_map(|slot| {
            let state = match &mut slot.state {
                SlotState::Terminated(t) if t.container_id == id => Some(t),
                _ => None,
            };
            state.or(slot.last_termination.as_mut().filter(|t| t.container_id == id))
        })
    }

    /// Adds an exec or exit to the pod's exec audit log.
    pub(super) fn audit(&self, observed: &Observed) {
        let Some(current) = &self.current else { return };
        if current.uid != observed.pod_uid {
            return;
        }
        let container = current
            .slots
            .iter()
            .find(|s| s.id.as_deref() == Some(observed.container_id.as_str()))
            .map(|s| s.name.clone())
            .unwrap_or_default();
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
        self.runtime.ebpf.record(&current.uid, &self.name.namespace, &self.name.name, entry);
    }
}
