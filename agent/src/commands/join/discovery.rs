//! Token discovery: `cluster-info` read without trust, verified with the token and the
//! CA pins, then read again over TLS verified with the CA it carries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use outpost_core::bootstrap_token::{self as bt, Pin, Token};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use super::Error;
use crate::apiserver::kubeconfig::{Problem, current_or_first_cluster};

/// How long to wait between two reads of `cluster-info` (kubeadm waits 5 s).
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// What discovery found and checked.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The API server, as `cluster-info` names it.
    pub server: String,
    /// The cluster's CA bundle (PEM), verified against the pins.
    pub ca_pem: Vec<u8>,
    /// The pinned public key the CA bundle has.
    pub pin: Pin,
}

/// Discovery, tried again on transient errors until `timeout`.
pub async fn discover(
    server: &str,
    token: &Token,
    pins: &[Pin],
    timeout: Duration,
) -> Result<Discovered, Error> {
    let url = cluster_info_url(server)?;
    let started = Instant::now();
    loop {
        match discover_once(&url, token, pins).await {
            Err(error) if error.is_transient() => {
                if started.elapsed() + RETRY_INTERVAL > timeout {
                    return Err(Error::GaveUp { waited: started.elapsed(), last: Box::new(error) });
                }
                tracing::warn!(error = %outpost_core::error_chain::describe(&error), "cluster-info not read yet; trying again");
                tokio::time::sleep(RETRY_INTERVAL).await;
            }
            result => return result,
        }
    }
}

/// `https://HOST:PORT/api/v1/namespaces/kube-public/configmaps/cluster-info` for
/// `--server` (`https://HOST:PORT` or `HOST:PORT`).
pub(super) fn cluster_info_url(server: &str) -> Result<reqwest::Url, Error> {
    let bad = |reason: &str| Error::Server { server: server.to_owned(), reason: reason.to_owned() };
    let with_scheme =
        if server.contains("://") { server.to_owned() } else { format!("https://{server}") };
    let mut url = reqwest::Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "https" {
        return Err(bad("token discovery needs TLS (the CA is what it verifies)"));
    }
    if url.host_str().is_none() {
        return Err(bad("no host"));
    }
    url.set_path(&format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        bt::CLUSTER_INFO_NAMESPACE,
        bt::CLUSTER_INFO
    ));
    url.set_query(None);
    Ok(url)
}

async fn discover_once(
    url: &reqwest::Url,
    token: &Token,
    pins: &[Pin],
) -> Result<Discovered, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let insecure = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| fetch_error(url, e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(
            crate::insecure_skip_verify::AnyServerCertificate::new(provider.clone()),
        ))
        .with_no_client_auth();
    let (kubeconfig, signature) = fetch(url, insecure, token.id()).await?;
    let signature = signature
        .ok_or_else(|| Error::NoSignature { url: url.to_string(), id: token.id().to_owned() })?;
    let verify = |source| Error::Verify { url: url.to_string(), source };
    bt::jws::verify(&signature, &kubeconfig, token).map_err(verify)?;
    let (server, ca_pem) = cluster_of(url, &kubeconfig)?;
    let pin = bt::check_pins(&bt::ca_pins(&ca_pem).map_err(verify)?, pins).map_err(verify)?;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca_pem) {
        let usable =
            cert.map_err(|e| e.to_string()).and_then(|c| roots.add(c).map_err(|e| e.to_string()));
        usable.map_err(|reason| Error::ClusterInfo {
            url: url.to_string(),
            reason: format!("its CA is not usable to verify TLS: {reason}"),
        })?;
    }
    let secure = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fetch_error(url, e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (again, _) = fetch(url, secure, token.id()).await?;
    if again != kubeconfig {
        return Err(Error::Changed { url: url.to_string() });
    }
    Ok(Discovered { server, ca_pem, pin })
}

fn fetch_error(url: &reqwest::Url, error: impl std::fmt::Display) -> Error {
    Error::Fetch { url: url.to_string(), reason: error.to_string() }
}

/// `cluster-info`'s `kubeconfig` and the token's signature of it, if any.
async fn fetch(
    url: &reqwest::Url,
    tls: rustls::ClientConfig,
    id: &str,
) -> Result<(String, Option<String>), Error> {
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .user_agent(concat!("outpost/", env!("CARGO_PKG_VERSION"), " (join)"))
        .build()
        .map_err(|e| fetch_error(url, outpost_core::error_chain::describe(&e)))?;
    let response = http
        .get(url.clone())
        .send()
        .await
        .map_err(|e| fetch_error(url, outpost_core::error_chain::describe(&e)))?;
    let status = response.status();
    let body = read_body(url, response).await?;
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|s| s.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_default();
        return Err(fetch_error(url, format!("{status} {message}")));
    }
    let unusable =
        |reason: &str| Error::ClusterInfo { url: url.to_string(), reason: reason.to_owned() };
    let config_map: serde_json::Value =
        serde_json::from_slice(&body).map_err(|_| unusable("not a JSON ConfigMap"))?;
    let data = |key: &str| {
        config_map.pointer(&format!("/data/{key}")).and_then(|v| v.as_str()).map(str::to_owned)
    };
    let kubeconfig = data(bt::KUBECONFIG_KEY).ok_or_else(|| unusable("it has no kubeconfig"))?;
    Ok((kubeconfig, data(&bt::jws_key(id))))
}

/// The most of an answer read: a ConfigMap is at most 1 MiB, and the first read is
/// from a server not trusted yet.
const MAX_BODY: usize = 2 << 20;

async fn read_body(url: &reqwest::Url, mut response: reqwest::Response) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| fetch_error(url, e))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(fetch_error(url, format!("the answer is larger than {MAX_BODY} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The server and CA (PEM) of the verified kubeconfig's cluster: the current context's,
/// else the first (as kubeadm takes it).
fn cluster_of(url: &reqwest::Url, kubeconfig: &str) -> Result<(String, Vec<u8>), Error> {
    let unusable = |reason: String| Error::ClusterInfo { url: url.to_string(), reason };
    let config = crate::apiserver::kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| unusable(format!("its kubeconfig does not parse: {e}")))?;
    let cluster = current_or_first_cluster(&config).map_err(|problem| match problem {
        Problem::NoServer => unusable("its cluster has no server".into()),
        _ => unusable("its kubeconfig has no cluster".into()),
    })?;
    let ca = cluster
        .ca_data
        .as_deref()
        .ok_or_else(|| unusable("its cluster has no certificate-authority-data".into()))?;
    let ca_pem = base64::engine::general_purpose::STANDARD
        .decode(ca.trim())
        .map_err(|e| unusable(format!("its certificate-authority-data is not base64: {e}")))?;
    Ok((cluster.server, ca_pem))
}
