//! A throwaway certificate authority and a server certificate for `127.0.0.1` and
//! `localhost`, made with rcgen, and the rustls server configuration that uses them; and
//! the server's kubelet-client identity ([`KubeletClientIdentity`]), a client certificate
//! from a CA of its own, as kubeadm makes `apiserver-kubelet-client.crt`.

use outpost::insecure_skip_verify::AnyServerCertificate;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why the TLS material could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot generate the test CA or server certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot build the TLS server configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("cannot read the kubelet-client identity's PEM: {0}")]
    Pem(String),
}

/// The CA (PEM, for clients to trust), the issuer that signs with it (the cluster
/// signer's, module `signer`) and the server's TLS configuration.
pub struct Material {
    pub ca_pem: String,
    pub issuer: Issuer<'static, KeyPair>,
    pub server_config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material").field("ca_pem", &self.ca_pem).finish_non_exhaustive()
    }
}

/// The common name of kubeadm's kubelet-client certificate.
pub const KUBELET_CLIENT_NAME: &str = "kube-apiserver-kubelet-client";
/// Its organization (group): kubeadm binds it to `cluster-admin`.
pub const KUBELET_CLIENT_GROUP: &str = "kubeadm:cluster-admins";

/// How the API server authenticates to kubelets (`--kubelet-client-certificate`,
/// `--kubelet-client-key`): a client certificate with CN [`KUBELET_CLIENT_NAME`] and O
/// [`KUBELET_CLIENT_GROUP`], signed by a CA of its own that a node trusts with
/// `--client-ca-file`. PEM throughout.
#[derive(Debug, Clone)]
pub struct KubeletClientIdentity {
    /// The CA that signed the certificate (for the node's `--client-ca-file`).
    pub ca_pem: String,
    pub cert_pem: String,
    /// The certificate's private key (PKCS#8).
    pub key_pem: String,
}

/// Makes a new CA and the kubelet-client certificate it signs.
pub fn kubelet_client() -> Result<KubeletClientIdentity, Error> {
    let (ca_cert, issuer) = ca_named("outpost-test-kubelet-client-ca")?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, KUBELET_CLIENT_NAME);
    params.distinguished_name.push(DnType::OrganizationName, KUBELET_CLIENT_GROUP);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer)?;
    Ok(KubeletClientIdentity {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A new self-signed CA: its certificate and the issuer that signs with it.
fn ca() -> Result<(rcgen::Certificate, Issuer<'static, KeyPair>), Error> {
    ca_named("outpost-test-apiserver-ca")
}

fn ca_named(name: &str) -> Result<(rcgen::Certificate, Issuer<'static, KeyPair>), Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    Ok((ca_cert, Issuer::new(ca_params, ca_key)))
}

/// A new CA, for a server without TLS to publish as its cluster's CA: its PEM and
/// issuer.
pub fn ca_only() -> Result<(String, Issuer<'static, KeyPair>), Error> {
    let (cert, issuer) = ca()?;
    Ok((cert.pem(), issuer))
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
    // A client certificate is asked for but not checked at the handshake: as the real
    // server, the x509 authenticator checks it for each request (an expired one is a
    // 401, not a failed handshake).
    let clients = Arc::new(AnyClient(provider.clone()));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(clients)
        .with_single_cert(chain, key)?;
    // As kube-apiserver (Go's net/http), HTTP/2 to clients that offer it, else HTTP/1.1.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Material { ca_pem: ca_cert.pem(), issuer, server_config: Arc::new(config) })
}

/// Takes any client certificate, or none, checking only the handshake's signatures.
#[derive(Debug)]
struct AnyClient(Arc<rustls::crypto::CryptoProvider>);

impl rustls::server::danger::ClientCertVerifier for AnyClient {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
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

/// The TLS client configuration the proxy dials nodes with (module `proxy`): the
/// kubelet-client certificate, and no check of the node's serving certificate (as
/// kube-apiserver without `--kubelet-certificate-authority`).
pub fn kubelet_client_config(
    identity: &KubeletClientIdentity,
) -> Result<Arc<rustls::ClientConfig>, Error> {
    let chain = CertificateDer::pem_slice_iter(identity.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes())
        .map_err(|e| Error::Pem(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyServerCertificate::new(provider.clone()));
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
