//! Running a CNI plugin binary: config on stdin, `CNI_*` in the environment, result or
//! error document on stdout, bounded by a timeout (the child is killed when it passes).

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting {}", binary.display())]
    Spawn {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("talking to {} over its stdin/stdout", binary.display())]
    Pipe {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} did not finish within {timeout:?} and was killed", binary.display())]
    Timeout { binary: PathBuf, timeout: Duration },
}

/// What a finished plugin left.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The plugin binary `kind` in the first of `bin_dirs` that holds it as an executable file.
pub fn find(bin_dirs: &[PathBuf], kind: &str) -> Option<PathBuf> {
    bin_dirs.iter().map(|dir| dir.join(kind)).find(|path| {
        path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// Runs `binary` with `env` added to the agent's environment and `stdin` as its input.
pub async fn run(
    binary: &Path,
    env: Vec<(&'static str, OsString)>,
    stdin: Vec<u8>,
    timeout: Duration,
) -> Result<Output> {
    let mut child = Command::new(binary)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| Error::Spawn { binary: binary.to_path_buf(), source })?;
    let pipe = |source| Error::Pipe { binary: binary.to_path_buf(), source };
    let talk = async {
        if let Some(mut input) = child.stdin.take() {
            input.write_all(&stdin).await?;
            input.shutdown().await?;
        }
        child.wait_with_output().await
    };
    let output = tokio::time::timeout(timeout, talk)
        .await
        .map_err(|_| Error::Timeout { binary: binary.to_path_buf(), timeout })?
        .map_err(pipe)?;
    Ok(Output { status: output.status, stdout: output.stdout, stderr: output.stderr })
}
