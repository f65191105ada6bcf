//! The HTTP side of the URL source: the client (TLS roots, timeouts, redirects, headers)
//! and one conditional GET whose body is read up to the S8 cap.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_core::manifest::MAX_MANIFEST_BYTES;
use outpost_core::source::url::{Error as Failure, Fetched, Validators};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url, redirect};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::Error;

/// The system's CA bundle (Debian, Ubuntu, Alpine, Arch; what curl and Go read first).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// How long connecting (TCP and TLS) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one fetch may take in all, from connecting to the body's last byte.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed before a fetch fails.
pub const MAX_REDIRECTS: usize = 5;

const USER_AGENT: &str = concat!("outpost/", env!("CARGO_PKG_VERSION"));

/// Headers the source or the HTTP client set themselves; a configured one would
/// break the conditional GET or the message framing.
const MANAGED_HEADERS: [&str; 6] = [
    "if-none-match",
    "if-modified-since",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
];

/// Which CAs an `https` URL's certificate must chain to (for error messages).
#[derive(Debug, Clone)]
pub enum Trust {
    CaFile(PathBuf),
    System,
    /// No CA file given and no system bundle found: `https` cannot work.
    Nothing,
}

impl std::fmt::Display for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trust::CaFile(path) => {
                write!(f, "the CAs of --manifest-url-ca-file {}", path.display())
            }
            Trust::System => write!(f, "the system's CAs ({SYSTEM_CA_BUNDLE})"),
            Trust::Nothing => write!(
                f,
                "no CA (no --manifest-url-ca-file given and no system bundle at {SYSTEM_CA_BUNDLE})"
            ),
        }
    }
}

/// The HTTP client of one manifest URL.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    url: Url,
    /// The URL as messages show it (password hidden).
    shown: String,
    headers: HeaderMap,
    trust: Trust,
}

impl Client {
    /// Checks the URL and headers, loads the trust roots and builds the client.
    pub fn new(
        url: &str,
        shown: &str,
        headers: &[(String, String)],
        ca_file: Option<&Path>,
    ) -> Result<Client, Error> {
        let parsed = parse_url(url, shown)?;
        let headers = header_map(headers)?;
        let (roots, trust) = match ca_file {
            Some(path) => (load_ca_file(path)?, Trust::CaFile(path.to_path_buf())),
            None => system_roots(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|source| Error::Tls { url: shown.to_owned(), source })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // This client speaks HTTP/1.1 only (reqwest is built without http2).
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TOTAL_TIMEOUT)
            .redirect(redirect_policy())
            .user_agent(USER_AGENT)
            .build()
            .map_err(|source| Error::Client { url: shown.to_owned(), source })?;
        Ok(Client { http, url: parsed, shown: shown.to_owned(), headers, trust })
    }

    /// One GET, conditional when `validators` has any. Reads at most
    /// [`MAX_MANIFEST_BYTES`] of the body (S8): a larger document is an error, and
    /// reading stops as soon as it is known to be too large.
    pub async fn fetch(&self, validators: Option<&Validators>) -> Result<Fetched, Failure> {
        if self.url.scheme() == "https" && matches!(self.trust, Trust::Nothing) {
            let detail = format!(
                "no CA to check its certificate against: no --manifest-url-ca-file given and \
                 no system bundle at {SYSTEM_CA_BUNDLE}; pass --manifest-url-ca-file"
            );
            return Err(Failure::Fetch { url: self.shown.clone(), detail });
        }
        let mut headers = self.headers.clone();
        let mut conditional = false;
        if let Some(v) = validators {
            // Values read back from a checkpoint may not be valid header values: skip those.
            for (name, value) in
                [(header::IF_NONE_MATCH, &v.etag), (header::IF_MODIFIED_SINCE, &v.last_modified)]
            {
                if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                    headers.insert(name, value);
                    conditional = true;
                }
            }
        }
        let mut response = self
            .http
            .get(self.url.clone())
            .headers(headers)
            .send()
            .await
            .map_err(|e| self.fetch_error(e))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_MODIFIED if conditional => return Ok(Fetched::NotModified),
            status => {
                let url = self.shown.clone();
                let reason = status.canonical_reason().unwrap_or("<unknown status code>");
                return Err(Failure::Status { url, code: status.as_u16(), reason: reason.into() });
            }
        }
        let too_large = |size| Failure::TooLarge { url: self.shown.clone(), size };
        let declared = response.content_length();
        if let Some(len) = declared.filter(|&len| len > MAX_MANIFEST_BYTES as u64) {
            return Err(too_large(Some(len)));
        }
        let text =
            |name| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let validators =
            Validators { etag: text(header::ETAG), last_modified: text(header::LAST_MODIFIED) };
        let capacity = declared.map_or(0, |len| len as usize);
        let mut body = Vec::with_capacity(capacity);
        while let Some(chunk) = response.chunk().await.map_err(|e| self.fetch_error(e))? {
            if body.len() + chunk.len() > MAX_MANIFEST_BYTES {
                return Err(too_large(None));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched::Document { body, validators })
    }

    fn fetch_error(&self, error: reqwest::Error) -> Failure {
        Failure::Fetch { url: self.shown.clone(), detail: describe(&error, &self.trust) }
    }
}

/// Only `http` and `https` URLs with a host. Host names are ASCII: an international one is
/// taken in its Punycode (`xn--`) form (the `idna` crate is built without Unicode tables).
fn parse_url(url: &str, shown: &str) -> Result<Url, Error> {
    let parsed = Url::parse(url).map_err(|e| {
        let hint = if url.is_ascii() {
            ""
        } else {
            "; host names must be ASCII: write an international one in its xn-- (Punycode) form"
        };
        Error::BadUrl { url: shown.to_owned(), reason: format!("{e}{hint}") }
    })?;
    match parsed.scheme() {
        "http" | "https" if parsed.has_host() => Ok(parsed),
        "http" | "https" => {
            Err(Error::BadUrl { url: shown.to_owned(), reason: "it has no host".to_owned() })
        }
        scheme => Err(Error::Scheme { url: shown.to_owned(), scheme: scheme.to_owned() }),
    }
}

/// The URL with its password (if any) replaced by `***`, for logs and messages.
pub fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// The configured headers, checked. Values are marked sensitive (they often carry
/// credentials), so they never show in debug output.
pub fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let bad = |reason| Error::Header { name: name.clone(), reason };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            bad("not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)")
        })?;
        if MANAGED_HEADERS.contains(&header_name.as_str()) {
            return Err(bad("set by the agent itself; remove it"));
        }
        let mut header_value = HeaderValue::from_str(value).map_err(|_| {
            bad("the value has characters not allowed in an HTTP header (control characters or non-ASCII)")
        })?;
        header_value.set_sensitive(true);
        map.append(header_name, header_value);
    }
    Ok(map)
}

/// Every certificate of a PEM bundle; an unreadable file or one with no certificate
/// is an error (a typo must not silently trust nothing).
fn load_ca_file(path: &Path) -> Result<rustls::RootCertStore, Error> {
    let pem =
        std::fs::read(path).map_err(|source| Error::CaFile { path: path.to_path_buf(), source })?;
    let bad = |reason: String| Error::CaPem { path: path.to_path_buf(), reason };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(format!("cannot parse PEM: {e}")))?;
        roots.add(cert).map_err(|e| bad(format!("a certificate is not usable as a CA: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad("no certificate found".to_owned()));
    }
    Ok(roots)
}

/// The system bundle's certificates, or none (https then fails at fetch time, saying why).
fn system_roots() -> (rustls::RootCertStore, Trust) {
    let mut roots = rustls::RootCertStore::empty();
    let Ok(pem) = std::fs::read(SYSTEM_CA_BUNDLE) else {
        return (roots, Trust::Nothing);
    };
    let (added, _ignored) =
        roots.add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).flatten());
    if added == 0 { (roots, Trust::Nothing) } else { (roots, Trust::System) }
}

/// At most [`MAX_REDIRECTS`] redirects, never from `https` down to `http`.
fn redirect_policy() -> redirect::Policy {
    redirect::Policy::custom(|attempt| {
        // `previous` starts with the URL first requested, which is not a redirect.
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(Error::TooManyRedirects { max: MAX_REDIRECTS });
        }
        let from_https = attempt.previous().last().is_some_and(|u| u.scheme() == "https");
        if from_https && attempt.url().scheme() != "https" {
            let to = redact(attempt.url().as_str());
            return attempt.error(Error::Downgrade { to });
        }
        attempt.follow()
    })
}

/// What went wrong with a request, in words that say what to check. reqwest's own
/// message ("error sending request for url (...)") says little; the cause chain says
/// the rest: connection refused, a DNS failure, an untrusted certificate.
pub fn describe(error: &reqwest::Error, trust: &Trust) -> String {
    if error.is_timeout() {
        return format!(
            "timed out (connecting may take {}s, the whole fetch {}s); check that the server is up and answers",
            CONNECT_TIMEOUT.as_secs(),
            TOTAL_TIMEOUT.as_secs()
        );
    }
    let mut causes: Vec<String> = Vec::new();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        if let Some(ours) = cause.downcast_ref::<Error>() {
            return ours.to_string();
        }
        if let Some(tls) = rustls_error(cause) {
            return match tls {
                rustls::Error::InvalidCertificate(reason) => format!(
                    "the server's TLS certificate is not trusted ({reason}) by {trust}; \
                     pass --manifest-url-ca-file with the CA that signed it"
                ),
                other => format!("TLS handshake failed: {other}"),
            };
        }
        let text = cause.to_string();
        if !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        next = cause.source();
    }
    if causes.is_empty() {
        return error.to_string();
    }
    let hint = if error.is_connect() { "; check that the server is up and reachable" } else { "" };
    format!("{}{hint}", causes.join(": "))
}

/// A rustls error in a cause, also inside (nested) `io::Error`s, whose `source()` skips
/// the error they wrap.
fn rustls_error<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut error = cause;
    loop {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let inner = error.downcast_ref::<std::io::Error>()?.get_ref()?;
        error = inner;
    }
}
