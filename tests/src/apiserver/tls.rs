//! A throwaway certificate authority and a server certificate for `127.0.0.1` and
//! `localhost`, made with rcgen, and the rustls server configuration that uses them.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why the TLS material could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot generate the test CA or server certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot build the TLS server configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The CA (PEM, for clients to trust) and the server's TLS configuration.
#[derive(Debug)]
pub struct Material {
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

/// A new self-signed CA: its certificate and the issuer that signs with it.
fn ca() -> Result<(rcgen::Certificate, Issuer<'static, KeyPair>), Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "outpost-test-apiserver-ca");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    Ok((ca_cert, Issuer::new(ca_params, ca_key)))
}

/// The PEM of a new CA, for a server without TLS to publish as its cluster's CA.
pub fn ca_pem() -> Result<String, Error> {
    Ok(ca()?.0.pem())
}

/// Makes a new CA and a server certificate it signs.
pub fn generate() -> Result<Material, Error> {
    let (ca_cert, issuer) = ca()?;

    let server_key = KeyPair::generate()?;
    let mut server_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    server_params.distinguished_name.push(DnType::CommonName, "outpost-test-apiserver");
    let server_cert = server_params.signed_by(&server_key, &issuer)?;

    let chain = vec![CertificateDer::from(server_cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Material { ca_pem: ca_cert.pem(), server_config: Arc::new(config) })
}
