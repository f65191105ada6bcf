//! The local API's TLS configuration (`--tls-cert-file`, `--tls-private-key-file`), with
//! client certificates verified against `--client-ca-file` when it is set. A client
//! certificate is optional at the handshake, so a caller may send a token instead; each
//! request carries an [`auth::Peer`](super::auth::Peer) saying whether its connection
//! presented a verified certificate, which is accepted instead of a bearer token. The
//! private key must be private to the agent's user. `serve` runs the accept loop.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::Error;
use super::Tls;
use super::auth::check_private;

/// J2: the TLS configuration with the certificate `resolver` gives (the serving
/// certificate the cluster signed, swapped at each renewal: new handshakes take the new
/// one, open connections go on), and the client CAs.
pub fn acceptor_resolving(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
    client_ca: Option<&Path>,
) -> Result<TlsAcceptor, Error> {
    let mut config = builder(client_ca)?.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS configuration: the server's certificate chain and key, and the client CAs.
pub fn acceptor(files: &Tls, client_ca: Option<&Path>) -> Result<TlsAcceptor, Error> {
    let chain = certificates("--tls-cert-file", &files.cert_file)?;
    check_private("--tls-private-key-file", &files.key_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|e| Error::Tls {
        flag: "--tls-private-key-file",
        path: files.key_file.clone(),
        reason: pem_reason(e, "private key"),
    })?;
    let mut config = builder(client_ca)?.with_single_cert(chain, key).map_err(|e| Error::Tls {
        flag: "--tls-private-key-file",
        path: files.key_file.clone(),
        reason: format!("does not go with the certificate in {}: {e}", files.cert_file.display()),
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The configuration up to the server's certificate: the client CAs' verifier.
fn builder(
    client_ca: Option<&Path>,
) -> Result<rustls::ConfigBuilder<rustls::ServerConfig, rustls::server::WantsServerCert>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(Error::TlsConfig)?;
    Ok(match client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("--client-ca-file", path)? {
                roots.add(cert).map_err(|e| Error::Tls {
                    flag: "--client-ca-file",
                    path: path.into(),
                    reason: format!("not a usable CA certificate: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|source| Error::ClientCa { path: path.into(), source })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    })
}

/// Every certificate in a PEM file; none is an error.
fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let fail = |reason: String| Error::Tls { flag, path: path.into(), reason };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(pem_reason(e, "certificate")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(pem_reason(e, "certificate")))?;
    if certs.is_empty() {
        return Err(fail("holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")".into()));
    }
    Ok(certs)
}

fn pem_reason(error: rustls_pki_types::pem::Error, what: &str) -> String {
    match error {
        rustls_pki_types::pem::Error::Io(e) => format!("cannot read it: {e}"),
        rustls_pki_types::pem::Error::NoItemsFound => format!("holds no PEM {what}"),
        other => format!("is not a valid PEM {what}: {other}"),
    }
}
