//! The agent's one reader and writer of kubeconfigs (besides kube's client config):
//! the cluster a kubeconfig's current context names (J1's bootstrap and `--kubeconfig`;
//! `outpost join`'s verified `cluster-info`, which falls back to its first cluster as
//! kubeadm does), whether it already uses the node's certificate, and the kubeconfig
//! the agent writes at `--kubeconfig` once it has a client certificate, as kubelet
//! writes it: the bootstrap kubeconfig's cluster (server and CA), and a user whose
//! certificate and key are the PKI's `kubelet-client-current.pem` link, so that a
//! renewal changes the link and never this file.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use serde_json::json;

/// What makes a kubeconfig's cluster unusable; says what it lacks, after the
/// kubeconfig's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("does not parse: {0}")]
    Parse(String),
    #[error("has no current context")]
    NoCurrentContext,
    #[error("names a cluster it does not have")]
    UnknownCluster,
    #[error("has no cluster")]
    NoCluster,
    #[error("has no server")]
    NoServer,
}

/// A kubeconfig that cannot be written: the file or directory, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The server (URL) and CA of a kubeconfig's cluster.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub server: String,
    /// `certificate-authority-data` (base64) or `certificate-authority` (a path).
    pub ca_data: Option<String>,
    pub ca_file: Option<String>,
    pub insecure: bool,
}

/// The cluster of `path`'s current context.
pub fn cluster_of(path: &Path) -> Result<ClusterInfo, Problem> {
    let config = Kubeconfig::read_from(path).map_err(|e| Problem::Parse(e.to_string()))?;
    let context = current_context(&config).ok_or(Problem::NoCurrentContext)?;
    let named = config.clusters.iter().find(|c| c.name == context.cluster);
    info(named.and_then(|c| c.cluster.as_ref()).ok_or(Problem::UnknownCluster)?)
}

/// The cluster of `config`'s current context, else its first one (as kubeadm reads
/// `cluster-info`).
pub fn current_or_first_cluster(config: &Kubeconfig) -> Result<ClusterInfo, Problem> {
    let current = current_context(config).map(|c| c.cluster.as_str());
    let named = current
        .and_then(|name| config.clusters.iter().find(|c| c.name == name))
        .or_else(|| config.clusters.first());
    info(named.and_then(|c| c.cluster.as_ref()).ok_or(Problem::NoCluster)?)
}

fn info(cluster: &kube::config::Cluster) -> Result<ClusterInfo, Problem> {
    Ok(ClusterInfo {
        server: cluster.server.clone().ok_or(Problem::NoServer)?,
        ca_data: cluster.certificate_authority_data.clone(),
        ca_file: cluster.certificate_authority.clone(),
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
    })
}

/// Whether the kubeconfig at `path` already takes its current user's certificate and
/// key from `pem`: then a renewal, which moves the `pem` link, leaves the file as it is
/// (with whatever an operator added to it: a `proxy-url`, other contexts).
pub fn uses(path: &Path, pem: &Path) -> bool {
    let Ok(config) = Kubeconfig::read_from(path) else { return false };
    let Some(user) = current_context(&config).and_then(|c| c.user.as_deref()) else {
        return false;
    };
    let auth = config.auth_infos.iter().find(|a| a.name == user).and_then(|a| a.auth_info.as_ref());
    let pem = pem.to_str();
    auth.is_some_and(|a| {
        pem.is_some() && a.client_certificate.as_deref() == pem && a.client_key.as_deref() == pem
    })
}

/// The context `config`'s `current-context` names.
fn current_context(config: &Kubeconfig) -> Option<&kube::config::Context> {
    let current = config.current_context.as_deref().unwrap_or_default();
    config.contexts.iter().find(|c| c.name == current).and_then(|c| c.context.as_ref())
}

/// Writes the kubeconfig at `path` (0600, by a rename) for `cluster` with the
/// certificate and key in `pem` (one file).
pub fn write(path: &Path, cluster: &ClusterInfo, pem: &Path) -> Result<(), WriteError> {
    let mut cluster_entry = json!({ "server": cluster.server });
    if let Some(data) = &cluster.ca_data {
        cluster_entry["certificate-authority-data"] = json!(data);
    }
    if let Some(file) = &cluster.ca_file {
        cluster_entry["certificate-authority"] = json!(file);
    }
    if cluster.insecure {
        cluster_entry["insecure-skip-tls-verify"] = json!(true);
    }
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "default-cluster", "cluster": cluster_entry }],
        "users": [{ "name": "default-auth", "user": {
            "client-certificate": pem,
            "client-key": pem,
        } }],
        "contexts": [{ "name": "default-context", "context": {
            "cluster": "default-cluster",
            "user": "default-auth",
            "namespace": "default",
        } }],
        "current-context": "default-context",
        "preferences": {},
    });
    let write = |target: &Path, source: std::io::Error| WriteError { path: target.into(), source };
    let text = serde_saphyr::to_string(&config)
        .map_err(|e| WriteError { path: path.into(), source: std::io::Error::other(e) })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| write(dir, e))?;
    }
    let staged = staged_path(path);
    std::fs::write(&staged, text).map_err(|e| write(&staged, e))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| write(&staged, e))?;
    std::fs::rename(&staged, path).map_err(|e| write(path, e))
}

fn staged_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".new");
    path.with_file_name(name)
}
