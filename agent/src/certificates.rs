//! J1, J2: the node's client certificate, as kubelet's TLS bootstrapping and
//! certificate manager keep it.
//!
//! With `--bootstrap-kubeconfig`, the agent's API client starts without credentials of
//! its own when the PKI directory has no valid client certificate: the manager
//! ([`manager`]) asks for one with the bootstrap credentials (a CertificateSigningRequest
//! for `kubernetes.io/kube-apiserver-client-kubelet`, CN `system:node:<name>`, O
//! `system:nodes`, module [`csr`]), writes it with its key in kubelet's layout
//! ([`pki`]) and the kubeconfig at `--kubeconfig` that uses it ([`kubeconfig`]), and
//! hands it to the client ([`crate::apiserver::Credentials`]). It then renews it at
//! kubelet's jittered 70–90 % of its lifetime through a new request sent with the
//! current certificate, and swaps it in without a restart. A certificate found expired
//! (the node was offline past its end) is replaced through the bootstrap credentials
//! again; when those do not work either, the agent says so (log, `/status`, metrics)
//! and keeps every pod running.

pub mod csr;
pub mod manager;
pub mod metrics;
pub mod pki;
mod rotation;
pub mod serving;
mod status;

use std::path::PathBuf;

pub use self::manager::Manager;
pub use self::status::{CertificateStatus, Status};

/// The managed certificates' status, by name (`client`, `server`).
pub type Statuses = Vec<(&'static str, Status)>;

/// What serves the node API's current serving certificate (its TLS handshakes).
pub type ServingResolver = std::sync::Arc<dyn rustls::server::ResolvesServerCert>;

/// J1, J2: the tasks of the client certificate's `manager` (with TLS bootstrapping or
/// rotation) and, with `serverTLSBootstrap` (`serving`: the node, and the client to
/// request with), of the serving certificate's; their status, and the serving
/// certificate.
pub fn start(
    manager: Option<Manager>,
    serving: Option<(&crate::config::node::Node, crate::apiserver::ApiClient)>,
) -> (Statuses, Option<ServingResolver>, Vec<crate::task::Task>) {
    use crate::task::Task;
    let (mut statuses, mut tasks) = (Vec::new(), Vec::new());
    if let Some(manager) = manager {
        statuses.push(("client", manager.status()));
        tasks.push(Task::infallible("certificates", manager.run()));
    }
    let Some((node, client)) = serving else { return (statuses, None, tasks) };
    let addresses = node.ip.iter().map(ToString::to_string).collect();
    let manager = serving::ServingManager::new(&node.state_dir, client, &node.name, addresses);
    statuses.push(("server", manager.status()));
    let resolver: ServingResolver = manager.certificate();
    tasks.push(Task::infallible("serving_certificate", manager.run()));
    (statuses, Some(resolver), tasks)
}

/// Why a certificate could not be had or kept.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot make the node's private key or certificate request: {0}")]
    Key(#[source] rcgen::Error),
    #[error("cannot create the CertificateSigningRequest: {0}")]
    Create(#[source] kube::Error),
    #[error("the CertificateSigningRequest {name} was deleted before its certificate was issued")]
    Deleted { name: String },
    #[error(
        "the CertificateSigningRequest {name} was denied: {reason}; ask the cluster's administrator"
    )]
    Denied { name: String, reason: String },
    #[error("the signer failed the CertificateSigningRequest {name}: {reason}")]
    Failed { name: String, reason: String },
    #[error(
        "no certificate was issued for the CertificateSigningRequest within {0:?}; is an approver running?"
    )]
    Timeout(std::time::Duration),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a usable certificate file: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("kubeconfig {}: {reason}", path.display())]
    Kubeconfig { path: PathBuf, reason: String },
    #[error(transparent)]
    Client(#[from] crate::apiserver::ConfigError),
}
