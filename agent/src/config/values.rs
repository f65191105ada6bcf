//! The settings whose values are names (`--containerd auto`, `--watcher fanotify`, ...):
//! read from the file as they are spelled on the command line, an unknown one refused
//! with the setting's name and the known names.

use clap::ValueEnum;
use serde::Deserialize;

/// A setting's value that is none of its names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `expected`: the known names (`auto, managed or external`).
    #[error("{setting}: {name:?}: expected {expected}")]
    Name { setting: &'static str, name: String, expected: String },
}

/// `--containerd`: who runs containerd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum Mode {
    // External if its socket exists, else managed if containerd is installed. (Not a doc
    // comment: clap would list the values with their descriptions.)
    Auto,
    Managed,
    External,
}

impl Mode {
    /// The runtime's choice this mode makes (`None`: auto, decided from what is there).
    pub fn choice(self) -> Option<crate::runtime::managed::Choice> {
        use crate::runtime::managed::Choice;
        match self {
            Mode::Auto => None,
            Mode::Managed => Some(Choice::Managed),
            Mode::External => Some(Choice::External),
        }
    }
}

/// `--watcher`: the kernel interface the manifest directory is watched with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum Preference {
    // fanotify, falling back to inotify (with the reason logged) when fanotify cannot
    // start, or when the first directory's filesystem cannot report file handles.
    Auto,
    Fanotify,
    Inotify,
}

/// The kernel interface the manifest directory is watched with: what `--watcher`
/// chose, once the file source has started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Fanotify,
    Inotify,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Fanotify => "fanotify",
            Backend::Inotify => "inotify",
        })
    }
}

/// `--log-format`: the agent's own logs, as text or JSON lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum LogFormat {
    Text,
    Json,
}

/// `--shim-grouping`: which containers share one containerd runc shim (containerd's
/// `io.containerd.runc.v2.group` annotation). A shim costs about 2.4 MiB PSS and each
/// container it adds about 0.15 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum ShimGrouping {
    // One shim per pod, as containerd's CRI plugin does: a shim that dies takes one pod's
    // containers with it.
    Pod,
    // One shim for the node's containers: the least memory; a shim that dies takes every
    // container on the node with it (containerd kills the tasks it can no longer reach).
    Node,
}

impl ShimGrouping {
    /// The runtime's shim group (`io.containerd.runc.v2.group`) of a container of pod
    /// `pod_uid` run by the runtime handler `handler` (`None`: the default one). With one
    /// shim for the node, each handler has its own (D5): a shim runs one runtime type,
    /// and one handler's shim dying takes no other handler's containers with it.
    pub fn group(self, pod_uid: &str, handler: Option<&str>) -> String {
        let node = crate::runtime::container::NODE_SHIM_GROUP;
        match (self, handler) {
            (ShimGrouping::Pod, _) => pod_uid.to_owned(),
            (ShimGrouping::Node, None) => node.to_owned(),
            (ShimGrouping::Node, Some(handler)) => format!("{node}-{handler}"),
        }
    }
}

/// `--container-logger`: which process writes containers' output into their CRI log
/// files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum ContainerLogger {
    // One node logger for every container (`outpost-container-log node`): it outlives
    // the agent and loses no line when it restarts.
    Node,
    // One logger per container, which the shim starts (containerd's `binary://` logging):
    // about 0.19 MiB PSS each; a container with `stdin: true` still uses the node logger.
    Container,
}

/// `--runtime`: the OCI runtime the runc shim runs containers, probes' and hooks' commands
/// and `exec` with (the shim's `BinaryName` option, as containerd's CRI runtime handlers
/// set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum OciRuntime {
    // runc, the shim's own default.
    Runc,
    // crun: the same OCI interface in C, faster to start and exec.
    Crun,
}

impl OciRuntime {
    /// The runtime's binary, as looked up on `PATH`.
    pub fn binary(self) -> &'static str {
        match self {
            OciRuntime::Runc => "runc",
            OciRuntime::Crun => "crun",
        }
    }
}

/// The value enums are read from the file as they are spelled on the command line; an
/// unknown name is refused with the setting's name and the known names.
macro_rules! from_value_name {
    ($($enum:ty: $setting:literal),*) => {$(
        impl TryFrom<String> for $enum {
            type Error = Error;
            fn try_from(name: String) -> Result<Self, Error> {
                from_value_name($setting, &name)
            }
        }
    )*};
}
from_value_name!(
    Mode: "containerd",
    Preference: "watcher",
    LogFormat: "logFormat",
    ShimGrouping: "shimGrouping",
    ContainerLogger: "containerLogger",
    OciRuntime: "runtime"
);

pub(super) fn from_value_name<T: ValueEnum>(setting: &'static str, name: &str) -> Result<T, Error> {
    T::from_str(name, false).map_err(|_| {
        let mut names: Vec<String> = T::value_variants().iter().map(value_name).collect();
        let last = names.pop().unwrap_or_default();
        let expected = format!("{} or {last}", names.join(", "));
        Error::Name { setting, name: name.to_owned(), expected }
    })
}

/// How `value` is spelled on the command line and in the file.
pub(super) fn value_name<T: ValueEnum>(value: &T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}
