//! What the pod workers run pods with (built by `worker::start`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::dns::Dns;
use super::values::{ContainerLogger, OciRuntime};
use crate::runtime::handler::Handler;

/// What the pod workers run pods with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Who keeps the containers' output: the node logger, or one per container.
    pub container_logger: ContainerLogger,
    /// The OCI runtime the default handler's shim runs.
    pub runtime: OciRuntime,
    /// The runtime handlers besides the default one, by name (D5); their binaries are
    /// checked when the pod workers start.
    pub runtime_handlers: BTreeMap<String, Handler>,
    pub cni_conf_dir: PathBuf,
    pub cni_bin_dirs: Vec<PathBuf>,
    /// `--image-credentials-file`: a Docker config.json of registry credentials.
    pub image_credentials_file: Option<PathBuf>,
    /// Image tarballs imported into containerd and followed (the `images_dir` task).
    pub images_dir: Option<PathBuf>,
    /// kubelet's root directory (`--root-dir`): `device-plugins/` (D1) and
    /// `pod-resources/` (D4) are under it.
    pub root_dir: PathBuf,
    /// Where `Localhost` seccomp profiles are (`<state-dir>/seccomp` unless given).
    pub seccomp_profile_root: PathBuf,
    /// D3: the CDI spec directories, in priority order (`/etc/cdi`, `/var/run/cdi` unless
    /// given).
    pub cdi_spec_dirs: Vec<PathBuf>,
    /// `--allowed-unsafe-sysctls`, checked to be namespaced.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// What each source's pods may do to the host (`admissionPolicy`).
    pub admission_policy: outpost_core::admission::Policy,
    /// K2: cluster DNS (`--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
    pub dns: Dns,
    /// D6: `memorySwap.swapBehavior`, what the containers' swap limits follow.
    pub swap_behavior: outpost_core::swap::Behavior,
}
