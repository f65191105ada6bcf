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

/// The server's kubelet-client identity (kube-apiserver's `--kubelet-client-certificate`
/// and `--kubelet-client-key`): a client certificate for `kube-apiserver-kubelet-client`
/// in kubeadm's `kubeadm:cluster-admins`, from a CA of its own that a node's
/// `--client-ca-file` trusts.
#[derive(Debug)]
pub struct KubeletClient {
    /// The CA that signed the client certificate (for the node's `--client-ca-file`).
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// The TLS client configuration the proxy dials nodes with: this certificate, and
    /// no check of the node's serving certificate (kube-apiserver without
    /// `--kubelet-certificate-authority`).
    pub config: Arc<rustls::ClientConfig>,
}

/// The user of the kubelet-client certificate.
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";
/// Its group.
pub const KUBELET_CLIENT_GROUP: &str = "kubeadm:cluster-admins";

/// Makes a new kubelet-client identity.
pub fn kubelet_client() -> Result<KubeletClient, Error> {
    let (ca_cert, issuer) = ca()?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, KUBELET_CLIENT_USER);
    params.distinguished_name.push(DnType::OrganizationName, KUBELET_CLIENT_GROUP);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer)?;
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyServer(provider.clone()));
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, private)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(KubeletClient {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        config: Arc::new(config),
    })
}

/// Accepts any server certificate, checking only the handshake's signatures.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
