//! J1: asking the cluster for a certificate, as kubelet's certificate manager does. The
//! key is made here (ECDSA P-256) and never sent: a `certificates.k8s.io/v1`
//! CertificateSigningRequest carries only the request it signs. The request is then
//! followed with a watch on its name until it is issued, denied or failed, each step
//! logged with what the agent waits for.

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use rcgen::{CertificateParams, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use tracing::info;

use super::Error;

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

/// Makes a key, sends the request with `client`, and waits for the certificate.
pub async fn request(client: kube::Client, wanted: &Wanted) -> Result<Issued, Error> {
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
    let cert_pem = wait(&api, &name, created).await?;
    info!(csr = %name, "certificate issued");
    Ok(Issued { cert_pem, key_pem: key.serialize_pem(), name })
}

/// The certificate of `name`, once issued: a watch from `seen` on, resumed when it ends.
async fn wait(
    api: &Api<CertificateSigningRequest>,
    name: &str,
    mut seen: CertificateSigningRequest,
) -> Result<String, Error> {
    let mut approved = false;
    loop {
        if let Some(cert) = outcome(&seen, name, &mut approved)? {
            return Ok(cert);
        }
        let version = seen.metadata.resource_version.clone().unwrap_or_default();
        let params = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(290);
        let mut events = api.watch(&params, &version).await.map_err(Error::Watch)?.boxed();
        while let Some(event) = events.try_next().await.map_err(Error::Watch)? {
            match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    seen = object;
                    if let Some(cert) = outcome(&seen, name, &mut approved)? {
                        return Ok(cert);
                    }
                }
                WatchEvent::Deleted(_) => return Err(Error::Deleted { name: name.to_owned() }),
                WatchEvent::Bookmark(bookmark) => {
                    seen.metadata.resource_version = Some(bookmark.metadata.resource_version);
                }
                WatchEvent::Error(_) => {
                    // Too old a resourceVersion: read it again and watch from there.
                    seen = api.get(name).await.map_err(Error::Watch)?;
                    break;
                }
            }
        }
    }
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
