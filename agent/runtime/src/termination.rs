//! Containers' termination messages, as kubelet keeps them: a host file per container
//! instance (`<pod dir>/containers/<name>/<container id>`, see
//! [`super::spec::layout::termination_message_file`]) made before the container starts and bound
//! read-write at its `terminationMessagePath`; after the container exits, kubelet reads
//! the last 4096 bytes of it, and with `terminationMessagePolicy: FallbackToLogsOnError`,
//! when the file is empty and the exit code is not 0, the last 80 lines of the
//! container's log, capped at their last 2048 bytes.
//!
//! The files go with the pod's directory (kubelet does not remove them with the
//! container either). Blocking IO: call it from `spawn_blocking`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::logs::read::{self, ContainerLog, Options};
use super::logs::{locate, log_file_name, rotation};

/// kubelet's `MaxContainerTerminationMessageLength`: the file's last bytes kept.
const MAX_MESSAGE: u64 = 4096;
/// kubelet's `MaxContainerTerminationMessageLogLines`: the log lines a fallback reads.
const MAX_LOG_LINES: usize = 80;
/// kubelet's `MaxContainerTerminationMessageLogLength`: the log bytes a fallback keeps.
const MAX_LOG_BYTES: usize = 2048;
/// How long a fallback waits for the container's logger to write the last of its output.
/// The kernel reports the exit before the logger has drained the pipes; a process the
/// container left behind can keep them open for good, so the wait is bounded.
const LOGGER_PATIENCE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[error("create termination message file {}", path.display())]
pub struct Error {
    path: PathBuf,
    #[source]
    source: io::Error,
}

/// Makes the (empty, mode 0666) termination-message file of a container instance, and
/// its directory.
pub fn create(file: &Path) -> Result<(), Error> {
    let error = |source| Error { path: file.to_path_buf(), source };
    if let Some(dir) = file.parent() {
        fs::DirBuilder::new().recursive(true).mode(0o750).create(dir).map_err(error)?;
    }
    OpenOptions::new().create(true).truncate(true).write(true).open(file).map_err(error)?;
    // The container may run as any user: kubelet makes it writable by all.
    fs::set_permissions(file, fs::Permissions::from_mode(0o666)).map_err(error)
}

/// Where an exited container left its message: its file, and its log directory
/// (`<pod log dir>/<container name>`) for the fallback.
#[derive(Debug, Clone, Copy)]
pub struct Exited<'a> {
    pub container: &'a Container,
    pub exit_code: i32,
    pub file: &'a Path,
    pub log_dir: &'a Path,
    /// `namespace/name`, for errors (the caller's span names the pod in logs).
    pub pod: &'a str,
}

/// The container's termination message, as kubelet's `getTerminationMessage` and
/// `readLastStringFromContainerLogs` find it; `None` when it left none. A file that
/// cannot be read gives kubelet's error text as the message (and is logged).
pub fn message(exited: &Exited<'_>) -> Option<String> {
    let fallback = exited.container.termination_message_policy.as_deref()
        == Some("FallbackToLogsOnError")
        && exited.exit_code != 0;
    let from_file = match read_tail(exited.file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => String::new(),
        Err(error) => {
            let message =
                format!("Error on reading termination log {}: {error}", exited.file.display());
            tracing::warn!(container = %exited.container.name, "{message}");
            return Some(message);
        }
    };
    let message = if from_file.is_empty() && fallback { log_tail(exited) } else { from_file };
    (!message.is_empty()).then_some(message)
}

/// The last [`MAX_MESSAGE`] bytes of `file`.
fn read_tail(file: &Path) -> io::Result<Vec<u8>> {
    let mut file = File::open(file)?;
    let length = file.metadata()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(MAX_MESSAGE)))?;
    let mut bytes = Vec::new();
    file.take(MAX_MESSAGE).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The last [`MAX_LOG_LINES`] lines of the container's latest log, cut to their last
/// [`MAX_LOG_BYTES`] bytes, once its logger has written them all; kubelet's error text
/// when it cannot be read.
fn log_tail(exited: &Exited<'_>) -> String {
    let mut out = Vec::new();
    if let Err(error) = copy_latest_log(exited, &mut out) {
        let message = format!(
            "Error on reading termination message from logs: {}",
            outpost_core::error_chain::describe(&error)
        );
        tracing::warn!(container = %exited.container.name, "{message}");
        return message;
    }
    let kept = &out[out.len().saturating_sub(MAX_LOG_BYTES)..];
    String::from_utf8_lossy(kept).into_owned()
}

/// Copies the last [`MAX_LOG_LINES`] lines of the container's latest run to `out`, once
/// its logger has written them all (or [`LOGGER_PATIENCE`] has passed).
fn copy_latest_log(exited: &Exited<'_>, out: &mut Vec<u8>) -> read::Result<()> {
    let container = &exited.container.name;
    let run = locate::run(exited.log_dir, exited.pod, container, false)?;
    if !rotation::wait_for_writer(&exited.log_dir.join(log_file_name(run)), LOGGER_PATIENCE) {
        tracing::debug!(%container, "the logger still writes the log: the message may miss its last lines");
    }
    let options = Options { tail: Some(MAX_LOG_LINES), ..Options::default() };
    ContainerLog::open_run(exited.log_dir, run, options)?.copy_to(out, &|| false)
}

#[cfg(test)]
mod tests;
