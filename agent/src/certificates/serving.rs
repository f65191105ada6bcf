//! J2: the local API's serving certificate from the cluster (kubelet's
//! `serverTLSBootstrap`): a `kubernetes.io/kubelet-serving` request for `CN=system:node:
//! <name>, O=system:nodes` whose SANs are the node's name and address, sent with the
//! node's client credentials, approved by the cluster's administrator (or an approver of
//! theirs), kept as `kubelet-server-<time>.pem` with the `kubelet-server-current.pem`
//! link, renewed at the same jittered deadline as the client certificate. The listener
//! takes it through [`ServingCertificate`], a certificate resolver over an `ArcSwap`:
//! each new handshake takes the current certificate, open connections and streams go on
//! with the one they started with. Until the first certificate, handshakes fail.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use outpost_core::certificates::rfc3339;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tracing::{info, warn};

use super::Error;
use super::csr::{self, SERVING_SIGNER, Wanted};
use super::pki::{Pair, Pki};
use super::rotation::{self, Rotation};
use super::status::CertificateStatus;
use crate::apiserver::ApiClient;

/// The serving certificate's kind in kubelet's file names.
const SERVER: &str = "server";

/// The current serving certificate, for the listener.
#[derive(Debug, Default)]
pub struct ServingCertificate(ArcSwapOption<CertifiedKey>);

impl rustls::server::ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.load_full()
    }
}

impl ServingCertificate {
    /// Takes the certificate and key of the PEM file at `pair.path` for new handshakes.
    fn install(&self, pair: &Pair) -> Result<(), Error> {
        let invalid = |reason: String| Error::Invalid { path: pair.path.clone(), reason };
        let text = std::fs::read(&pair.path)
            .map_err(|source| Error::Read { path: pair.path.clone(), source })?;
        let chain = CertificateDer::pem_slice_iter(&text)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(&text).map_err(|e| invalid(e.to_string()))?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| invalid(e.to_string()))?;
        self.0.store(Some(Arc::new(CertifiedKey::new(chain, key))));
        Ok(())
    }
}

/// The serving certificate's manager: the `serving_certificate` task.
pub struct ServingManager {
    pki: Pki,
    client: ApiClient,
    wanted: Wanted,
    certificate: Arc<ServingCertificate>,
    status: Arc<watch::Sender<CertificateStatus>>,
}

impl std::fmt::Debug for ServingManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingManager").field("wanted", &self.wanted).finish_non_exhaustive()
    }
}

impl ServingManager {
    /// For the node `node_name` at `addresses` (its name is a SAN too), with the node's
    /// client; the current certificate, if valid, is installed now.
    pub fn new(
        state_dir: &std::path::Path,
        client: ApiClient,
        node_name: &str,
        addresses: Vec<String>,
    ) -> ServingManager {
        let mut sans = vec![node_name.to_owned()];
        sans.extend(addresses.into_iter().filter(|a| a != node_name));
        let wanted = Wanted {
            signer: SERVING_SIGNER,
            common_name: format!("system:node:{node_name}"),
            sans,
            usages: &["digital signature", "server auth"],
        };
        let manager = ServingManager {
            pki: Pki::new(state_dir),
            client,
            wanted,
            certificate: Arc::default(),
            status: Arc::new(watch::channel(CertificateStatus::default()).0),
        };
        if let Ok(Some(pair)) = manager.valid_current() {
            let _ = manager.use_pair(&pair);
        }
        manager
    }

    /// The listener's certificate resolver.
    pub fn certificate(&self) -> Arc<ServingCertificate> {
        self.certificate.clone()
    }

    pub fn status(&self) -> super::Status {
        self.status.subscribe()
    }

    /// Forever: get a certificate when there is none, renew it at its deadline.
    pub async fn run(self) {
        rotation::run(self).await;
    }

    /// A new certificate, written and installed.
    async fn renew(&self) -> Result<(), Error> {
        info!(sans = ?self.wanted.sans, "requesting the serving certificate");
        let connectivity = self.client.connectivity().clone();
        let issued = csr::request(self.client.kube().clone(), connectivity, &self.wanted).await?;
        let pair = self.pki.store(SERVER, &issued.cert_pem, &issued.key_pem)?;
        self.use_pair(&pair)?;
        info!(expires = %rfc3339(pair.not_after), path = %pair.path.display(), "serving certificate installed: new connections get it");
        Ok(())
    }

    fn use_pair(&self, pair: &Pair) -> Result<(), Error> {
        self.certificate.install(pair)?;
        self.status.send_modify(|s| s.took(pair));
        Ok(())
    }
}

impl Rotation for ServingManager {
    fn status(&self) -> &watch::Sender<CertificateStatus> {
        &self.status
    }

    fn valid_current(&self) -> Result<Option<Pair>, Error> {
        let Some(pair) = self.pki.current(SERVER)? else { return Ok(None) };
        if !rotation::ended(&pair) {
            return Ok(Some(pair));
        }
        // Reported as expired until a new one comes.
        self.status.send_modify(|s| s.shows(&pair));
        Ok(None)
    }

    async fn keep(&self, pair: &Pair) -> Result<(), Error> {
        let deadline = rotation::deadline(&self.status, pair);
        self.status.send_modify(|s| s.rotation_deadline = Some(deadline));
        // A step of either clock: judged again.
        if !rotation::wait_until(deadline, pair).await {
            return Ok(());
        }
        self.renew().await?;
        self.status.send_modify(|s| s.rotations += 1);
        Ok(())
    }

    async fn obtain(&self) -> Result<(), Error> {
        self.renew().await
    }

    fn failed(&self, problem: &str) {
        warn!(%problem, "cannot get the serving certificate yet; retrying");
    }
}
