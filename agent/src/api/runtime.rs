//! The container runtime as the local API reaches it: set once containerd answers (the
//! local API starts before it does), absent in a dry run. `/exec` and `/run` run commands
//! through it; `/containerLogs` reads the container records (which run a container ID is)
//! from it.

use std::sync::{Arc, OnceLock};

use axum::http::StatusCode;

use crate::runtime::Containerd;
use crate::runtime::exec::Execs;

/// What the local API does in containers.
#[derive(Debug)]
pub struct Runtime {
    /// Commands in running containers.
    pub execs: Execs,
    /// The container records.
    pub containerd: Containerd,
    /// Where the pods' sandboxes are (`<run-dir>/pods/<uid>/ns/net` holds a pod's network
    /// namespace): `/portForward` connects from inside it.
    pub pods_dir: std::path::PathBuf,
    /// `<run-dir>/io`: the stdio FIFOs of containers with stdin (`/attach` writes input
    /// there).
    pub io_dir: std::path::PathBuf,
}

/// The runtime, once connected; clones reach the same slot.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSlot(Arc<OnceLock<Runtime>>);

impl RuntimeSlot {
    /// Makes the runtime available; later calls change nothing.
    pub fn set(&self, runtime: Runtime) {
        let _ = self.0.set(runtime);
    }

    /// What fills the slot once containerd answers: its execs, and the pods' namespaces
    /// and stdio FIFOs under `run_dir`.
    pub fn on_connected(self, run_dir: std::path::PathBuf) -> Box<dyn FnOnce(&Containerd) + Send> {
        Box::new(move |containerd: &Containerd| {
            self.set(Runtime {
                execs: Execs::new(containerd.clone(), run_dir.join("exec")),
                containerd: containerd.clone(),
                pods_dir: run_dir.join("pods"),
                io_dir: run_dir.join("io"),
            });
        })
    }

    pub(super) fn get(&self) -> Option<&Runtime> {
        self.0.get()
    }
}

/// Why the runtime cannot be reached: the status code, reason and message to answer.
pub(super) fn unavailable(
    slot: Option<&RuntimeSlot>,
) -> Result<&Runtime, (StatusCode, &'static str, String)> {
    let message = match slot {
        None => "this agent runs no containers (--dry-run)",
        Some(slot) => match slot.get() {
            Some(runtime) => return Ok(runtime),
            None => {
                "the agent has not connected to containerd yet; retry in a moment (outpost status shows the runtime)"
            }
        },
    };
    Err((StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message.to_owned()))
}
