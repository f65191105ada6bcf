//! One exec process in containerd and its FIFO directory, and their removal: by
//! [`Process::remove`] on the paths that finish, or, if the future that owns it is
//! dropped (a cancelled probe, a closed connection, a removal cut short), by a task its
//! `Drop` spawns. Each step of a removal may be repeated.

use std::path::PathBuf;
use std::time::Duration;

use containerd_client::services::v1::{DeleteProcessRequest, KillRequest, WaitRequest};

use super::{Containerd, Error, fifo};

/// How long a killed exec process may take to be reaped before it is deleted anyway.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// An exec process of container `id` (once `Tasks.Exec` may have created it) and the
/// directory of its FIFOs.
#[derive(Debug)]
pub struct Process {
    pub containerd: Containerd,
    pub id: String,
    pub exec_id: String,
    pub dir: PathBuf,
    /// containerd may know the process: `Tasks.Exec` was sent and did not fail.
    created: bool,
    /// Removed already (nothing left for `Drop`).
    removed: bool,
}

impl Process {
    /// The FIFO directory of exec `exec_id` is about to be made.
    pub fn new(containerd: &Containerd, id: &str, exec_id: String, dir: PathBuf) -> Process {
        Process {
            containerd: containerd.clone(),
            id: id.to_owned(),
            exec_id,
            dir,
            created: false,
            removed: false,
        }
    }

    /// `Tasks.Exec` is about to be sent: from now on containerd may know the process.
    pub fn creating(&mut self) {
        self.created = true;
    }

    /// `Tasks.Exec` failed: containerd does not know the process.
    pub fn not_created(&mut self) {
        self.created = false;
    }

    /// Removes the process from containerd (SIGKILL first if `kill`: it may still run) and
    /// its FIFO directory. Dropped half-way, `Drop` starts over.
    pub async fn remove(mut self, kill: bool) -> Result<(), Error> {
        let result =
            remove(&self.containerd, &self.id, &self.exec_id, &self.dir, self.created, kill).await;
        self.removed = true;
        result
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime left (the agent is exiting): containerd's side stays until the
            // container's task is deleted; the FIFOs at least go.
            let _ = fifo::remove_dir(&self.dir);
            return;
        };
        let containerd = self.containerd.clone();
        let (id, exec_id) = (std::mem::take(&mut self.id), std::mem::take(&mut self.exec_id));
        let dir = std::mem::take(&mut self.dir);
        let created = self.created;
        runtime.spawn(async move {
            if let Err(e) = remove(&containerd, &id, &exec_id, &dir, created, true).await {
                tracing::warn!(
                    container_id = %id,
                    exec_id = %exec_id,
                    error = %outpost_core::error_chain::describe(&e),
                    "cannot remove an abandoned exec process"
                );
            }
        });
    }
}

async fn remove(
    containerd: &Containerd,
    id: &str,
    exec_id: &str,
    dir: &std::path::Path,
    created: bool,
    kill: bool,
) -> Result<(), Error> {
    let result = if created { delete(containerd, id, exec_id, kill).await } else { Ok(()) };
    // After the process: the shim may hold the FIFOs open until it is deleted.
    let removed = fifo::remove_dir(dir).map_err(|source| Error::Fifo {
        id: id.to_owned(),
        path: dir.to_owned(),
        source,
    });
    result.and(removed)
}

/// SIGKILL (if `kill`), the exit, `Tasks.DeleteProcess`.
async fn delete(containerd: &Containerd, id: &str, exec_id: &str, kill: bool) -> Result<(), Error> {
    let failed = |step, source| Error::Containerd { id: id.to_owned(), step, source };
    let mut tasks = containerd.tasks();
    if kill {
        let request = KillRequest {
            container_id: id.to_owned(),
            exec_id: exec_id.to_owned(),
            signal: libc::SIGKILL as u32,
            all: false,
        };
        match containerd.in_shim(tasks.kill(request)).await {
            // It ran: wait for the shim to reap it (a running process cannot be deleted).
            Ok(_) => {
                let request =
                    WaitRequest { container_id: id.to_owned(), exec_id: exec_id.to_owned() };
                let _ = tokio::time::timeout(KILL_WAIT, tasks.wait(request)).await;
            }
            // Finished already (NotFound: "process already finished", or the whole task
            // is gone), or never started (FailedPrecondition: "process not created").
            Err(s)
                if matches!(s.code(), tonic::Code::NotFound | tonic::Code::FailedPrecondition) => {}
            Err(source) => return Err(failed("killing the exec process", source)),
        }
    }
    let request = DeleteProcessRequest { container_id: id.to_owned(), exec_id: exec_id.to_owned() };
    match containerd.in_shim(tasks.delete_process(request)).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
        Err(source) => Err(failed("deleting the exec process", source)),
    }
}
