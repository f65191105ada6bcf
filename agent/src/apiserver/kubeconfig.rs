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

use kube::config::{Kubeconfig, KubeconfigError};
use serde_json::json;

/// Why a kubeconfig could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("it is not UTF-8 or UTF-16 text")]
    Encoding,
    #[error("it is not valid YAML: {0}")]
    Yaml(#[source] Box<serde_saphyr::Error>),
    #[error("it is not a kubeconfig: {0}")]
    Invalid(#[source] serde_json::Error),
    #[error(transparent)]
    Kube(#[from] KubeconfigError),
}

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

/// Reads the kubeconfig at `path` as kube's `Kubeconfig::read_from` does: its YAML
/// documents merged in order, relative file paths made relative to its directory (an
/// exec plugin's command only when it has a `/`, as client-go), a UTF-16 file with its
/// byte order mark read. The YAML is read into a `serde_json::Value` first, and the
/// kubeconfig from it (the binary then holds one YAML reader for kubeconfigs, not one per
/// type in them: [`crate::json`]). What that changes: a scalar is typed by YAML's core
/// schema before the kubeconfig's type sees it, so `namespace: 123` is a number and
/// refused, where kube's reader would take it as the string "123".
pub fn read(path: &Path) -> Result<Kubeconfig, ReadError> {
    let bytes = std::fs::read(path).map_err(ReadError::Read)?;
    let text = text(&bytes).ok_or(ReadError::Encoding)?;
    parse(&text, path.parent().filter(|d| !d.as_os_str().is_empty()))
}

/// A kubeconfig from YAML text, as kube's `Kubeconfig::from_yaml` reads it (its documents
/// merged), through a `Value` as [`read`]: `cluster-info`'s kubeconfig (`outpost join`).
pub fn from_yaml(text: &str) -> Result<Kubeconfig, ReadError> {
    parse(text, None)
}

/// The documents of `text` merged, their relative paths made relative to `dir` if given.
fn parse(text: &str, dir: Option<&Path>) -> Result<Kubeconfig, ReadError> {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| ReadError::Yaml(Box::new(e)))?;
    let mut merged: Option<Kubeconfig> = None;
    for document in documents {
        let mut config: Kubeconfig =
            serde_json::from_value(document).map_err(ReadError::Invalid)?;
        if let Some(dir) = dir {
            make_absolute(&mut config, dir);
        }
        merged = Some(match merged {
            Some(merged) => merged.merge(config)?,
            None => config,
        });
    }
    Ok(merged.unwrap_or_default())
}

/// A kubeconfig file's text: UTF-8 (a byte order mark dropped), or UTF-16 with its mark.
fn text(bytes: &[u8]) -> Option<String> {
    let utf16 = |rest: &[u8], from: fn([u8; 2]) -> u16| {
        if !rest.len().is_multiple_of(2) {
            return None;
        }
        let units: Vec<u16> = rest.chunks_exact(2).map(|c| from([c[0], c[1]])).collect();
        String::from_utf16(&units).ok()
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        _ => String::from_utf8(bytes.to_vec()).ok(),
    }
}

/// The files a kubeconfig names, relative to `dir` when they are relative.
fn make_absolute(config: &mut Kubeconfig, dir: &Path) {
    let absolute = |file: &mut Option<String>| {
        if let Some(path) = file.as_deref().filter(|f| Path::new(f).is_relative())
            && let Some(joined) = dir.join(path).to_str()
        {
            *file = Some(joined.to_owned());
        }
    };
    for cluster in config.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        absolute(&mut cluster.certificate_authority);
    }
    for auth in config.auth_infos.iter_mut().filter_map(|a| a.auth_info.as_mut()) {
        absolute(&mut auth.client_certificate);
        absolute(&mut auth.client_key);
        absolute(&mut auth.token_file);
        if let Some(exec) = auth.exec.as_mut()
            && exec.command.as_deref().is_some_and(|c| c.contains('/'))
        {
            absolute(&mut exec.command);
        }
    }
}

/// The cluster of `path`'s current context.
pub fn cluster_of(path: &Path) -> Result<ClusterInfo, Problem> {
    let config = read(path).map_err(|e| Problem::Parse(e.to_string()))?;
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
    let Ok(config) = read(path) else { return false };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeadm-shaped kubeconfig, a second document adding a context and a user, and
    /// relative files: what kube's own reader makes of it.
    const TWO_DOCUMENTS: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: pki/ca.crt
    insecure-skip-tls-verify: false
contexts:
- name: system:node:edge-1@kubernetes
  context:
    cluster: kubernetes
    user: system:node:edge-1
    namespace: default
current-context: system:node:edge-1@kubernetes
users:
- name: system:node:edge-1
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: pki/key.pem
---
apiVersion: v1
kind: Config
contexts:
- name: plugin
  context: {cluster: kubernetes, user: plugin}
users:
- name: plugin
  user:
    token-file: token
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: bin/credential-helper
      args: [--node, edge-1]
      interactiveMode: Never
- name: on-path
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, interactiveMode: Never}
";

    fn as_json(config: &Kubeconfig) -> serde_json::Value {
        serde_json::to_value(config).expect("a kubeconfig serializes")
    }

    #[test]
    fn a_kubeconfig_reads_as_kube_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.conf");
        std::fs::write(&path, TWO_DOCUMENTS).unwrap();
        let ours = read(&path).unwrap();
        let kube = Kubeconfig::read_from(&path).unwrap();
        assert_eq!(as_json(&ours), as_json(&kube));
        let dir = dir.path().to_str().unwrap();
        let ca = ours.clusters[0].cluster.as_ref().unwrap().certificate_authority.clone();
        assert_eq!(ca, Some(format!("{dir}/pki/ca.crt")));
        let exec = |user: usize| {
            let auth = ours.auth_infos[user].auth_info.as_ref().unwrap();
            auth.exec.as_ref().unwrap().command.clone().unwrap()
        };
        assert_eq!(exec(1), format!("{dir}/bin/credential-helper"));
        assert_eq!(exec(2), "aws", "a command without a / is looked up on PATH");
        assert_eq!(cluster_of(&path).unwrap().server, "https://10.0.0.1:6443");
        let text = from_yaml(TWO_DOCUMENTS).unwrap();
        assert_eq!(as_json(&text), as_json(&Kubeconfig::from_yaml(TWO_DOCUMENTS).unwrap()));
    }

    #[test]
    fn utf16_and_a_utf8_byte_order_mark_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend(TWO_DOCUMENTS.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&path, &utf16).unwrap();
        let expected = as_json(&Kubeconfig::read_from(&path).unwrap());
        assert_eq!(as_json(&read(&path).unwrap()), expected);
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice(TWO_DOCUMENTS.as_bytes());
        std::fs::write(&path, &bom).unwrap();
        assert_eq!(as_json(&read(&path).unwrap()), expected);
        std::fs::write(&path, [0xFF, 0xFE, 0x41]).unwrap();
        assert!(matches!(read(&path), Err(ReadError::Encoding)));
    }

    #[test]
    fn what_is_not_a_kubeconfig_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        assert!(matches!(read(&path), Err(ReadError::Read(_))));
        std::fs::write(&path, "clusters: [").unwrap();
        assert!(matches!(read(&path), Err(ReadError::Yaml(_))));
        std::fs::write(&path, "clusters: 7\n").unwrap();
        let error = read(&path).unwrap_err();
        assert!(matches!(error, ReadError::Invalid(_)), "{error}");
        std::fs::write(&path, "apiVersion: v1\n---\napiVersion: v2\n").unwrap();
        assert!(matches!(read(&path), Err(ReadError::Kube(KubeconfigError::ApiVersionMismatch))));
        std::fs::write(&path, "").unwrap();
        assert!(read(&path).unwrap().clusters.is_empty(), "an empty file is an empty kubeconfig");
    }
}
