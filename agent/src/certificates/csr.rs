//! J1: asking the cluster for a certificate, as kubelet's certificate manager does. The
//! key is made here (ECDSA P-256) and never sent: a `certificates.k8s.io/v1`
//! CertificateSigningRequest carries only the request it signs. The request is then
//! followed until it is issued, denied or failed, each step logged with what the agent
//! waits for: a list and watch of its name (`fieldSelector=metadata.name=<name>`, as
//! kubelet's `csr.WaitForCertificate` does) through [`crate::apiserver::watcher`], which
//! resumes, lists again and backs off when the watch breaks.

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams};
use outpost_core::backoff::Backoff;
use rcgen::{CertificateParams, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use tracing::{info, warn};

use super::Error;
use crate::apiserver::Connectivity;
use crate::apiserver::watcher::{self, Event, MIN_WATCH_TIMEOUT_SECS, watcher};

/// kube-controller-manager's signer of kubelet client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Its signer of kubelet serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// What to ask for.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub signer: &'static str,
    /// `system:node:<name>`; the organization is always `system:nodes`.
    pub common_name: String,
    /// DNS names and IP addresses (serving certificates only).
    pub sans: Vec<String>,
    pub usages: &'static [&'static str],
}

impl Wanted {
    /// The node's client certificate: CN `system:node:<name>`, O `system:nodes`, usages
    /// digital signature and client auth (an ECDSA key: no key encipherment).
    pub fn client(node_name: &str) -> Wanted {
        Wanted {
            signer: CLIENT_SIGNER,
            common_name: format!("system:node:{node_name}"),
            sans: Vec::new(),
            usages: &["digital signature", "client auth"],
        }
    }
}

/// A certificate issued for a key made here, both PEM.
#[derive(Debug)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    /// The CertificateSigningRequest's name.
    pub name: String,
}

/// Makes a key, sends the request with `client`, and waits for the certificate (the
/// watch marks `connectivity` as it goes, and is woken by it).
pub async fn request(
    client: kube::Client,
    connectivity: Connectivity,
    wanted: &Wanted,
) -> Result<Issued, Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(Error::Key)?;
    let mut params = CertificateParams::new(wanted.sans.clone()).map_err(Error::Key)?;
    params.distinguished_name.push(DnType::CommonName, wanted.common_name.as_str());
    params.distinguished_name.push(DnType::OrganizationName, "system:nodes");
    let request = params.serialize_request(&key).and_then(|r| r.pem()).map_err(Error::Key)?;
    let object = CertificateSigningRequest {
        metadata: ObjectMeta { generate_name: Some("csr-".into()), ..ObjectMeta::default() },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.into_bytes()),
            signer_name: wanted.signer.to_owned(),
            usages: Some(wanted.usages.iter().map(|u| (*u).to_owned()).collect()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let api: Api<CertificateSigningRequest> = Api::all(client);
    let created = api.create(&PostParams::default(), &object).await.map_err(Error::Create)?;
    let name = created.metadata.name.clone().unwrap_or_default();
    info!(
        csr = %name,
        signer = wanted.signer,
        subject = %wanted.common_name,
        "waiting for the CertificateSigningRequest to be approved and its certificate issued"
    );
    let cert_pem = wait(api, connectivity, &name, &created).await?;
    info!(csr = %name, "certificate issued");
    Ok(Issued { cert_pem, key_pem: key.serialize_pem(), name })
}

/// The certificate of `name`, once issued: what `created` says, then what the list and
/// watch of its name say.
async fn wait(
    api: Api<CertificateSigningRequest>,
    connectivity: Connectivity,
    name: &str,
    created: &CertificateSigningRequest,
) -> Result<String, Error> {
    let mut approved = false;
    if let Some(cert) = outcome(created, name, &mut approved)? {
        return Ok(cert);
    }
    let config = watcher::Config {
        field_selector: Some(format!("metadata.name={name}")),
        page_size: None,
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        // Before the node has its client: the bootstrap's one watch.
        pacer: None,
    };
    let events = watcher(api, config, connectivity);
    futures::pin_mut!(events);
    // Whether a list since the last `Init` has held it: one that does not means it is gone.
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Event::Init => listed = false,
            Event::InitApply(object) | Event::Apply(object) => {
                listed = true;
                if let Some(cert) = outcome(&object, name, &mut approved)? {
                    return Ok(cert);
                }
            }
            Event::InitDone if !listed => return Err(Error::Deleted { name: name.to_owned() }),
            Event::Delete(_) => return Err(Error::Deleted { name: name.to_owned() }),
            Event::Failed(error) => {
                warn!(csr = %name, error = %crate::error_chain::describe(&error), "cannot follow the CertificateSigningRequest; trying again");
            }
            Event::InitDone | Event::Bookmark | Event::Recovered => {}
        }
    }
    // The watcher's stream does not end.
    Err(Error::Deleted { name: name.to_owned() })
}

/// The certificate if issued; an error if denied or failed; `None` while waiting.
fn outcome(
    object: &CertificateSigningRequest,
    name: &str,
    approved: &mut bool,
) -> Result<Option<String>, Error> {
    let status = object.status.as_ref();
    for condition in status.and_then(|s| s.conditions.as_ref()).into_iter().flatten() {
        let why =
            || condition.message.clone().or_else(|| condition.reason.clone()).unwrap_or_default();
        match condition.type_.as_str() {
            "Denied" => return Err(Error::Denied { name: name.to_owned(), reason: why() }),
            "Failed" => return Err(Error::Failed { name: name.to_owned(), reason: why() }),
            "Approved" if !*approved => {
                *approved = true;
                info!(csr = %name, "approved; waiting for the signer to issue the certificate");
            }
            _ => {}
        }
    }
    match status.and_then(|s| s.certificate.as_ref()) {
        Some(cert) if !cert.0.is_empty() => {
            String::from_utf8(cert.0.clone()).map(Some).map_err(|_| Error::Failed {
                name: name.to_owned(),
                reason: "the certificate is not PEM text".into(),
            })
        }
        _ => Ok(None),
    }
}
