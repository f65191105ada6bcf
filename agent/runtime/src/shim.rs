//! Which runc v2 shim containerd runs, and whether it can run `containerLogger: container`.
//!
//! containerd 1.6 looks the shim of runtime `io.containerd.runc.v2` up as
//! `containerd-shim-runc-v2` on its own `PATH` (then beside its own binary). containerd's
//! Go shim starts a container's `binary://` logger; the Rust shim
//! (`containerd-runc-shim` 0.1.1, which `cargo xtask containerd start --rust-shim` puts
//! first on the private containerd's `PATH`) takes only FIFOs for stdio, and a `binary://` log URI
//! leaves the task's creation hanging. So with `containerLogger: container` the agent asks
//! which shim containerd would run and refuses to start unless it is the Go one.
//!
//! The containerd is the process on the other end of its socket (`SO_PEERCRED`); its
//! `PATH` is read from `/proc/<pid>/environ`. When the socket does not answer (a managed
//! containerd not yet started by this agent, which gives it its own `PATH`), this
//! process's `PATH` is used. The Go shim is recognized by its answer to `-v` (its
//! version); the Rust one rejects the flag.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use outpost_host::{Host, Kernel, Pid};

/// The binary containerd runs for runtime `io.containerd.runc.v2`.
pub const RUNC_SHIM: &str = "containerd-shim-runc-v2";
/// How long the shim's `-v` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "containerLogger: container needs containerd's Go runc v2 shim, but the \
         `{RUNC_SHIM}` containerd runs is {} ({answer}): that shim takes only FIFOs for a \
         container's output and would hang creating a container logged through a binary:// \
         URI. Use containerLogger: node (the default), or give containerd the Go shim \
         (take the Rust shim's directory off containerd's PATH; for the private test \
         containerd: `cargo xtask containerd stop` and `start` without --rust-shim)",
        .shim.display()
    )]
    NotTheGoShim { shim: PathBuf, answer: String },
}

/// Fails when the runc v2 shim containerd (on `socket`) would run is known not to be the Go
/// one. A shim that cannot be found or asked is not a refusal: the container's creation
/// will say what is wrong.
pub async fn refuse_binary_logging(socket: &Path) -> Result<(), Error> {
    let path = containerd_path(&Kernel, socket).await.or_else(|| std::env::var_os("PATH"));
    let shim = path.and_then(|path| outpost_host::in_search_path(RUNC_SHIM, &path));
    let Some(shim) = shim else { return Ok(()) };
    match version(&shim).await {
        Some(Answer::Go) | None => Ok(()),
        Some(Answer::Other(answer)) => Err(Error::NotTheGoShim { shim, answer }),
    }
}

/// The `PATH` of the process listening on `socket`, if it answers and `host` shows its
/// environment.
async fn containerd_path(host: &dyn Host, socket: &Path) -> Option<OsString> {
    let stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    let pid = u32::try_from(stream.peer_cred().ok()?.pid()?).ok()?;
    let environ = host.proc_pid(Pid::Id(pid), "environ").ok()?;
    path_of_environ(&environ)
}

/// `PATH`'s value in a `/proc/<pid>/environ` (NUL-separated `NAME=value`).
fn path_of_environ(environ: &[u8]) -> Option<OsString> {
    use std::os::unix::ffi::OsStringExt;
    let value = environ.split(|&b| b == 0).find_map(|var| var.strip_prefix(b"PATH="))?;
    Some(OsString::from_vec(value.to_vec()))
}

#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Go,
    Other(String),
}

/// What `shim -v` says: the Go shim prints its version and exits 0. `None` when it could
/// not be run or did not answer in time.
async fn version(shim: &Path) -> Option<Answer> {
    let mut command = tokio::process::Command::new(shim);
    command.arg("-v").stdin(std::process::Stdio::null()).kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output()).await.ok()?.ok()?;
    Some(classify(output.status.success(), &output.stdout, &output.stderr))
}

fn classify(success: bool, stdout: &[u8], stderr: &[u8]) -> Answer {
    let out = String::from_utf8_lossy(stdout);
    if success && out.contains("Version:") {
        return Answer::Go;
    }
    let said = if out.trim().is_empty() { String::from_utf8_lossy(stderr) } else { out };
    let first = said.lines().next().unwrap_or("no answer").trim();
    Answer::Other(format!("`-v` answered: {first}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_shims_version_answer_is_recognized() {
        let go = b"/usr/bin/containerd-shim-runc-v2:\n  Version:  1.6.20~ds1\n  Revision: x\n";
        assert_eq!(classify(true, go, b""), Answer::Go);
    }

    #[test]
    fn the_rust_shims_refusal_of_the_flag_is_not_the_go_shim() {
        let rust =
            b"io.containerd.runc.v2-rs: InvalidArgument(\"flag provided but not defined: -v\")";
        let Answer::Other(answer) = classify(false, b"", rust) else { panic!("taken for Go") };
        assert!(answer.contains("flag provided but not defined"), "{answer}");
    }

    #[tokio::test]
    async fn containerds_path_is_read_from_the_environment_of_the_process_on_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("containerd.sock");
        // This process listens: the peer's pid is its own.
        let _listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let host = outpost_host::Recording::new();
        let environ = format!("/proc/{}/environ", std::process::id());
        host.file(&environ, "HOME=/root\0PATH=/opt/shim:/usr/bin\0");
        let path = containerd_path(&host, &socket).await;
        assert_eq!(path, Some(OsString::from("/opt/shim:/usr/bin")));
        assert_eq!(host.reads(), [PathBuf::from(environ)]);
        assert_eq!(containerd_path(&host, &dir.path().join("gone.sock")).await, None);
    }

    #[test]
    fn path_is_read_from_a_processs_environment() {
        let environ = b"HOME=/root\0PATH=/opt/shim:/usr/bin\0TERM=x\0";
        assert_eq!(path_of_environ(environ), Some(OsString::from("/opt/shim:/usr/bin")));
        assert_eq!(path_of_environ(b"HOME=/root\0"), None);
    }
}
