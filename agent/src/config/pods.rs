//! What the pod workers run pods with (built by `worker::start`).

use std::path::PathBuf;

use super::dns::Dns;
use super::values::{ContainerLogger, OciRuntime};

/// What the pod workers run pods with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Who keeps the containers' output: the node logger, or one per container.
    pub container_logger: ContainerLogger,
    /// The OCI runtime the shims run.
    pub runtime: OciRuntime,
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
    /// `--allowed-unsafe-sysctls`, checked to be namespaced.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// What each source's pods may do to the host (`admissionPolicy`).
    pub admission_policy: outpost_core::admission::Policy,
    /// K2: cluster DNS (`--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
    pub dns: Dns,
}
