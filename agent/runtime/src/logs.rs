//! Container logs, as kubelet keeps them: CRI-format files at
//! `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`.
//!
//! They are written by `outpost-container-log container-log PATH` (the
//! `outpost-container-log` crate, installed beside `outpost`; see [`logger_binary`]), a
//! process that containerd's shim starts for each container from the `binary://` log URI
//! of [`logger_uri`] (so logging does not depend on the agent staying up), and read
//! ([`read`]) by `outpost logs` and the local API. A container with `stdin: true` gets
//! the same logger from the agent instead, on FIFOs ([`crate::stdio`]).
//!
//! Rotation limits are kubelet's defaults ([`DEFAULT_MAX_SIZE`], [`DEFAULT_MAX_FILES`]):
//! the shim passes the logger exactly the arguments of the URI's query, one key (several
//! would arrive in random order, the query being a Go map), and that key carries the path.

pub mod locate;
pub mod read;

pub use outpost_container_log::rotation::{DEFAULT_MAX_FILES, DEFAULT_MAX_SIZE};
pub use outpost_container_log::{cri, rotation, time};

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where kubelet (and so `outpost logs`, by default) keeps pod logs.
pub const DEFAULT_POD_LOG_DIR: &str = "/var/log/pods";
/// The query key of the logger URI; it is also the hidden subcommand's name.
pub const LOGGER_SUBCOMMAND: &str = outpost_container_log::SUBCOMMAND;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot build the log URI: {} is not an absolute path (give the absolute path of the outpost executable and of the log file)",
        .0.display()
    )]
    RelativePath(PathBuf),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `<root>/<namespace>_<name>_<uid>`: the directory of one pod's logs.
pub fn pod_log_dir(root: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root.join(format!("{namespace}_{name}_{uid}"))
}

/// `<root>/<namespace>_<name>_<uid>/<container>/<restart_count>.log`: the live log file of
/// one run of a container.
pub fn container_log_path(
    root: &Path,
    namespace: &str,
    name: &str,
    uid: &str,
    container: &str,
    restart_count: u32,
) -> PathBuf {
    pod_log_dir(root, namespace, name, uid).join(container).join(log_file_name(restart_count))
}

/// `<restart_count>.log`.
pub fn log_file_name(restart_count: u32) -> String {
    format!("{restart_count}.log")
}

/// The container logger the shims run for an agent whose executable is `exe`: the small
/// `outpost-container-log` beside it, or else `exe` itself, whose hidden `container-log`
/// subcommand runs the same logger at the cost of the agent's much larger process image
/// (about 1.4 MiB more proportional memory per container).
pub fn logger_binary(exe: &Path) -> PathBuf {
    let small = exe.with_file_name(outpost_container_log::BINARY);
    if small.is_file() { small } else { exe.to_path_buf() }
}

/// The `binary://` log URI that makes containerd's shim run `exe container-log LOG_PATH`
/// (`exe` is either logger of [`logger_binary`]) with the container's stdout and stderr
/// (`binary://<exe>?container-log=<log_path>`, both percent-encoded). Both paths must be
/// absolute.
pub fn logger_uri(exe: &Path, log_path: &Path) -> Result<String> {
    for path in [exe, log_path] {
        if !path.is_absolute() {
            return Err(Error::RelativePath(path.to_path_buf()));
        }
    }
    Ok(format!(
        "binary://{}?{LOGGER_SUBCOMMAND}={}",
        percent_encode(exe.as_os_str().as_bytes()),
        percent_encode(log_path.as_os_str().as_bytes())
    ))
}

/// Percent-encodes every byte but RFC 3986's unreserved characters and `/`, so the result
/// is read back unchanged as a URI path or as a query value (where Go reads `+` as a
/// space: it is encoded too).
fn percent_encode(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    out
}

#[cfg(test)]
mod tests;
