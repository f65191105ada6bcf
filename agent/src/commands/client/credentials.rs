//! What the client proves itself with: a bearer token (`--token-file`, else the agent
//! config's `tokenFile`) and a client certificate (`--client-certificate`,
//! `--client-key`), and whom it trusts for https (`--certificate-authority`, else the
//! agent config's own `tlsCertFile` when the agent serves TLS, else the system's CAs).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use rustls_platform_verifier::BuilderVerifierExt;

use super::{Error, Result};
use crate::cli::ClientArgs;
use crate::config::Config;

/// The credentials sent with every request.
pub struct Credentials {
    token: Option<String>,
    /// Where the token came from, or why none is sent.
    token_origin: String,
    /// The client certificate presented, if any.
    client_certificate: Option<PathBuf>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_origin", &self.token_origin)
            .field("client_certificate", &self.client_certificate)
            .finish()
    }
}

impl Credentials {
    /// Reads the token: a `--token-file` that cannot be read is an error; the config's
    /// `tokenFile` that cannot be read (e.g. root's only) is noted, and none is sent.
    pub fn load(
        args: &ClientArgs,
        config: Option<&Config>,
        config_file: &Path,
    ) -> Result<Credentials> {
        let client_certificate = args.client_certificate.clone();
        if let Some(path) = &args.token_file {
            let origin = "--token-file".to_owned();
            let token = read_token(path, &origin)?;
            let token_origin = format!("a bearer token from --token-file {}", path.display());
            return Ok(Credentials { token: Some(token), token_origin, client_certificate });
        }
        let from_config = config.and_then(|c| c.api.auth.token_file.as_ref());
        let (token, token_origin) = match from_config {
            Some(path) => {
                let origin = format!("tokenFile in {}", config_file.display());
                match read_token(path, &origin) {
                    Ok(token) => {
                        (Some(token), format!("a bearer token from {} ({origin})", path.display()))
                    }
                    Err(e) => (
                        None,
                        format!(
                            "no bearer token: {}; pass --token-file FILE",
                            crate::error_chain::describe(&e)
                        ),
                    ),
                }
            }
            None => (
                None,
                "no bearer token (no --token-file, and no agent config with a tokenFile)"
                    .to_owned(),
            ),
        };
        Ok(Credentials { token, token_origin, client_certificate })
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// What was sent, for an error message (never the token).
    pub fn describe(&self) -> String {
        let certificate = match &self.client_certificate {
            Some(path) => {
                format!("the client certificate {} (--client-certificate)", path.display())
            }
            None => "no client certificate".to_owned(),
        };
        format!("sent: {}; {certificate}", self.token_origin)
    }

    /// The TLS client configuration (used for https servers).
    pub fn tls_config(
        &self,
        args: &ClientArgs,
        config: Option<&Config>,
    ) -> Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(Error::TlsConfig)?;
        let agent_cert = config.and_then(|c| c.api.auth.tls.as_ref()).map(|t| t.cert_file.clone());
        let trusted = match (&args.certificate_authority, agent_cert) {
            (Some(path), _) => Some(("--certificate-authority", path.clone())),
            (None, Some(path)) => Some(("tlsCertFile of the agent config", path)),
            (None, None) => None,
        };
        let builder = match trusted {
            Some((flag, path)) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates(flag, &path)? {
                    roots.add(cert).map_err(|e| Error::Tls {
                        flag,
                        path: path.clone(),
                        reason: format!("not a usable CA certificate: {e}"),
                    })?;
                }
                builder.with_root_certificates(roots)
            }
            None => builder.with_platform_verifier().map_err(Error::TlsConfig)?,
        };
        let mut tls = match (&args.client_certificate, &args.client_key) {
            (Some(cert), Some(key)) => {
                let chain = certificates("--client-certificate", cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| Error::Tls {
                    flag: "--client-key",
                    path: key.clone(),
                    reason: format!("not a PEM private key: {e}"),
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| Error::Tls {
                    flag: "--client-key",
                    path: cert.clone(),
                    reason: format!("does not go with the certificate: {e}"),
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        // reqwest is built without http2.
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tls)
    }
}

/// The token in `path`, surrounding whitespace removed.
fn read_token(path: &Path, origin: &str) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::TokenFile {
        path: path.to_owned(),
        origin: origin.to_owned(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::EmptyToken { path: path.to_owned(), origin: origin.to_owned() });
    }
    Ok(token.to_owned())
}

fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let fail = |reason: String| Error::Tls { flag, path: path.to_owned(), reason };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(format!("cannot read it: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(fail("holds no PEM certificate".to_owned()));
    }
    Ok(certs)
}
