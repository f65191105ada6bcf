//! J1, J2: the `certificates` task, kubelet's client certificate manager. It keeps the
//! node's client certificate valid: bootstrapped when there is none or it expired,
//! renewed at the rotation deadline, swapped into the API client each time; and it
//! publishes where the certificate stands ([`Status`]) for `/status` and the metrics.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use outpost_core::certificates::{Expiry, rfc3339};
use tokio::sync::watch;
use tracing::{error, info, warn};

use super::Error;
use super::csr::{self, Wanted};
use super::pki::{Pair, Pki};
use super::rotation::{self, Rotation};
use super::status::{CertificateStatus, Status};
use crate::apiserver::kubeconfig::{self, ClusterInfo};
use crate::apiserver::{ApiClient, Connectivity, Credentials, server_time};

/// kubelet's wait for a bootstrap or renewal request's certificate.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// How long the agent's start waits for its first certificate before going on without
/// (pods keep running; the manager keeps trying).
pub const START_WAIT: Duration = Duration::from_secs(30);

/// The client certificate's kind in kubelet's file names.
const CLIENT: &str = "client";

/// The certificate manager, built: its API client and the task that keeps it.
pub struct Manager {
    node_name: String,
    kubeconfig: PathBuf,
    bootstrap: Option<PathBuf>,
    rotate: bool,
    pki: Pki,
    credentials: Credentials,
    client: ApiClient,
    status: Arc<watch::Sender<CertificateStatus>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("kubeconfig", &self.kubeconfig).finish_non_exhaustive()
    }
}

/// What the manager is built from.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node_name: String,
    pub kubeconfig: PathBuf,
    pub bootstrap: Option<PathBuf>,
    pub rotate: bool,
    pub state_dir: PathBuf,
}

impl Settings {
    /// The manager's settings for the kubeconfig at `kubeconfig` when its certificate is
    /// bootstrapped or rotated; `None`: its credentials are used as they are.
    pub fn of(
        config: &crate::config::Certificates,
        node: &crate::config::node::Node,
        kubeconfig: &std::path::Path,
    ) -> Option<Settings> {
        (config.bootstrap_kubeconfig.is_some() || config.rotate).then(|| Settings {
            node_name: node.name.clone(),
            kubeconfig: kubeconfig.to_owned(),
            bootstrap: config.bootstrap_kubeconfig.clone(),
            rotate: config.rotate,
            state_dir: node.state_dir.clone(),
        })
    }
}

impl Manager {
    /// The API client, with the current certificate if it is valid, else with none
    /// until the first bootstrap (tried here for up to [`START_WAIT`]).
    pub async fn start(settings: Settings, connectivity: Connectivity) -> Result<Manager, Error> {
        let source = settings.bootstrap.as_deref().unwrap_or(&settings.kubeconfig);
        let cluster = cluster_of(source)?;
        let (client, credentials) =
            Credentials::none(server_url(&cluster), connectivity, "waiting for TLS bootstrapping");
        let (status, _) = watch::channel(CertificateStatus::default());
        let manager = Manager {
            node_name: settings.node_name,
            kubeconfig: settings.kubeconfig,
            bootstrap: settings.bootstrap,
            rotate: settings.rotate,
            pki: Pki::new(&settings.state_dir),
            credentials,
            client,
            status: Arc::new(status),
        };
        match manager.valid_current()? {
            Some(pair) => {
                manager.use_pair(&pair, &cluster).await?;
            }
            None => {
                info!(
                    kubeconfig = %manager.kubeconfig.display(),
                    "no valid client certificate: TLS bootstrapping with the bootstrap kubeconfig"
                );
                match tokio::time::timeout(START_WAIT, manager.bootstrap()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => rotation::report(&manager, &e),
                    Err(_) => warn!(
                        waited = ?START_WAIT,
                        "no client certificate yet; starting without (pods keep running), still waiting"
                    ),
                }
            }
        }
        Ok(manager)
    }

    /// The agent's API client; its credentials follow the certificate.
    pub fn client(&self) -> ApiClient {
        self.client.clone()
    }

    pub fn status(&self) -> Status {
        self.status.subscribe()
    }

    /// The `certificates` task: forever, renew at the deadline, bootstrap when expired.
    pub async fn run(self) {
        rotation::run(self).await;
    }

    /// Gets a certificate with the bootstrap credentials.
    async fn bootstrap(&self) -> Result<(), Error> {
        let Some(bootstrap) = &self.bootstrap else {
            return Err(Error::Kubeconfig {
                path: self.kubeconfig.clone(),
                reason: "has no valid client certificate, and there is no --bootstrap-kubeconfig to get one with".into(),
            });
        };
        let cluster = cluster_of(bootstrap)?;
        let (client, _) = ApiClient::kube_client(bootstrap).await?;
        let wanted = Wanted::client(&self.node_name);
        let issued = with_timeout(csr::request(client, Connectivity::default(), &wanted)).await?;
        let pair = self.pki.store(CLIENT, &issued.cert_pem, &issued.key_pem)?;
        self.use_pair(&pair, &cluster).await?;
        info!(expires = %rfc3339(pair.not_after), path = %pair.path.display(), "TLS bootstrapping done: the node has its client certificate");
        Ok(())
    }

    /// Writes the kubeconfig for the current link, unless it already takes it (a renewal
    /// moves the link and leaves the file as it is), and loads it into the client.
    async fn use_pair(&self, pair: &Pair, cluster: &ClusterInfo) -> Result<(), Error> {
        let link = self.pki.current_path(CLIENT);
        if !kubeconfig::uses(&self.kubeconfig, &link) {
            kubeconfig::write(&self.kubeconfig, cluster, &link)
                .map_err(|e| Error::Write { path: e.path, source: e.source })?;
        }
        self.credentials.load(&self.kubeconfig).await?;
        self.status.send_modify(|s| s.took(pair));
        Ok(())
    }
}

impl Rotation for Manager {
    fn status(&self) -> &watch::Sender<CertificateStatus> {
        &self.status
    }

    /// The current certificate if it is valid now (an expired one is said so).
    fn valid_current(&self) -> Result<Option<Pair>, Error> {
        let Some(pair) = self.pki.current(CLIENT)? else { return Ok(None) };
        if rotation::ended(&pair) {
            let problem = format!(
                "the client certificate {} expired at {}",
                pair.path.display(),
                rfc3339(pair.not_after)
            );
            warn!("{problem}; getting a new one with the bootstrap credentials");
            self.credentials.clear(&problem);
            self.status.send_modify(|s| {
                s.shows(&pair);
                s.problem = Some(problem);
            });
            return Ok(None);
        }
        Ok(Some(pair))
    }

    /// Waits for `pair`'s rotation deadline (or its end, without rotation) and renews it.
    async fn keep(&self, pair: &Pair) -> Result<(), Error> {
        let deadline = self.rotate.then(|| rotation::deadline(&self.status, pair));
        self.status.send_modify(|s| {
            s.shows(pair);
            s.rotation_deadline = deadline;
        });
        let until = deadline.unwrap_or(pair.not_after).min(pair.not_after);
        info!(deadline = %rfc3339(until), expires = %rfc3339(pair.not_after), "client certificate valid; waiting for its rotation deadline");
        // A step of either clock: judged again.
        if !rotation::wait_until(until, pair).await {
            return Ok(());
        }
        if deadline.is_none() || rotation::ended(pair) {
            return Ok(());
        }
        info!("rotating the client certificate");
        let issued = with_timeout(csr::request(
            self.client.kube().clone(),
            self.client.connectivity().clone(),
            &Wanted::client(&self.node_name),
        ))
        .await?;
        let new = self.pki.store(CLIENT, &issued.cert_pem, &issued.key_pem)?;
        let cluster = cluster_of(&self.kubeconfig)?;
        self.use_pair(&new, &cluster).await?;
        self.status.send_modify(|s| s.rotations += 1);
        info!(expires = %rfc3339(new.not_after), "client certificate rotated");
        Ok(())
    }

    async fn obtain(&self) -> Result<(), Error> {
        self.bootstrap().await
    }

    /// Says loudly what keeps the node from a valid certificate.
    fn failed(&self, problem: &str) {
        let standing = self.status.borrow().expiry(server_time::trusted_now());
        if matches!(standing, Some(Expiry::Valid | Expiry::ExpiringSoon)) {
            warn!(%problem, "cannot renew the client certificate yet; retrying");
        } else {
            error!(%problem, "the node has no valid client certificate; pods keep running, the API server gets nothing until one is issued");
        }
    }
}

async fn with_timeout<T>(request: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    tokio::time::timeout(ISSUE_TIMEOUT, request).await.unwrap_or(Err(Error::Timeout(ISSUE_TIMEOUT)))
}

/// The server as kube's client names it (with its trailing slash), so that a
/// checkpoint written with a kubeconfig of the same server is the same.
fn server_url(cluster: &ClusterInfo) -> String {
    cluster
        .server
        .parse::<http::Uri>()
        .map(|uri| uri.to_string())
        .unwrap_or_else(|_| cluster.server.clone())
}

/// The cluster of the kubeconfig at `path`'s current context.
fn cluster_of(path: &std::path::Path) -> Result<ClusterInfo, Error> {
    kubeconfig::cluster_of(path)
        .map_err(|problem| Error::Kubeconfig { path: path.into(), reason: problem.to_string() })
}
