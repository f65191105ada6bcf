//! The registry HTTP API for one repository: manifests and blobs, over a client that
//! answers a `401` challenge once (see `auth.rs`) and then keeps the authorization.

pub(super) mod auth;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::{self, HeaderValue};
use reqwest::{Response, StatusCode};
use rustls_platform_verifier::BuilderVerifierExt as _;

use super::super::MAX_DOCUMENT;
use super::super::content::Chunks;
use super::super::layout::{self, Descriptor, Kind};
use super::super::reference::Reference;
use super::super::store;
use super::super::tree::{self, Blobs};
use super::Error;
use crate::image::credentials::Credential;

/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the registry may stay silent while answering (no limit on a whole layer).
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("outpost/", env!("CARGO_PKG_VERSION"));

/// The manifest media types this client understands, for `Accept`.
const MANIFEST_TYPES: [&str; 4] = [
    layout::OCI_INDEX,
    layout::OCI_MANIFEST,
    layout::DOCKER_MANIFEST_LIST,
    layout::DOCKER_MANIFEST,
];

/// A parsed reference taken apart: `domain/repository(:tag|@digest)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The whole normalized reference: the image record's name.
    pub image: String,
    pub domain: String,
    pub repository: String,
    /// The tag, or the digest if the reference pins one.
    pub reference: String,
}

impl From<&Reference> for Target {
    fn from(parsed: &Reference) -> Target {
        Target {
            image: parsed.whole(),
            domain: parsed.registry().to_owned(),
            repository: parsed.repository().to_owned(),
            reference: parsed.digest().or(parsed.tag()).unwrap_or("latest").to_owned(),
        }
    }
}

/// The base URL of a registry: plain http for loopback hosts and `insecure` ones
/// (`host:port`, or `host` for any port; a scheme is ignored); Docker Hub's API host.
pub fn endpoint(domain: &str, insecure: &[String]) -> String {
    let host = match domain.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => domain,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback());
    let listed = insecure.iter().any(|entry| {
        let entry = entry.split_once("://").map_or(entry.as_str(), |(_, rest)| rest);
        let entry = entry.trim_end_matches('/');
        entry == domain || entry == host
    });
    match (domain, loopback || listed) {
        ("docker.io", _) => "https://registry-1.docker.io".to_owned(),
        (_, true) => format!("http://{domain}"),
        (_, false) => format!("https://{domain}"),
    }
}

/// An HTTP client for registries, verifying https with the platform's CAs (ring).
pub fn client(image: &str) -> Result<reqwest::Client, Error> {
    let tls_error = |source| Error::Tls { image: image.to_owned(), source };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_platform_verifier()
        .map_err(tls_error)?
        .with_no_client_auth();
    // reqwest is built without http2.
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .redirect(reqwest::redirect::Policy::limited(5))
        .user_agent(USER_AGENT)
        .build()
        .map_err(|source| Error::Client { image: image.to_owned(), source })
}

/// One repository of a registry, with one credential (or none).
#[derive(Debug)]
pub struct Repository {
    http: reqwest::Client,
    /// `<endpoint>/v2/<repository>`.
    base: String,
    name: Target,
    credential: Option<Credential>,
    /// The `Authorization` a challenge led to (marked sensitive).
    authorization: Mutex<Option<HeaderValue>>,
    /// The manifest [`Repository::resolve`] fetched: (digest, bytes).
    resolved: Option<(String, Vec<u8>)>,
}

impl Repository {
    pub fn new(
        http: reqwest::Client,
        endpoint: &str,
        name: &Target,
        credential: Option<Credential>,
    ) -> Repository {
        Repository {
            http,
            base: format!("{endpoint}/v2/{}", name.repository),
            name: name.clone(),
            credential,
            authorization: Mutex::new(None),
            resolved: None,
        }
    }

    pub fn name(&self) -> &Target {
        &self.name
    }

    /// Fetches the manifest (or index) the reference names; returns its descriptor.
    pub async fn resolve(&mut self) -> Result<Descriptor, Error> {
        let what = format!("manifest {}", self.name.reference);
        let url = format!("{}/manifests/{}", self.base, self.name.reference);
        let response = self.get(&url, &MANIFEST_TYPES.join(", "), &what).await?;
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or_default().trim().to_owned());
        let announced = response
            .headers()
            .get("docker-content-digest")
            .and_then(|value| value.to_str().ok())
            .filter(|digest| digest.starts_with("sha256:"))
            .map(str::to_owned);
        let bytes = self.read_document(response, &what).await?;
        let digest = layout::sha256_digest(&bytes);
        let pinned =
            self.name.reference.starts_with("sha256:").then(|| self.name.reference.clone());
        if let Some(expected) = pinned.or(announced).filter(|expected| *expected != digest) {
            return Err(self.digest_error(&what, expected, digest));
        }
        let media_type = match content_type.filter(|t| layout::kind(t) != Kind::Other) {
            Some(media_type) => media_type,
            None => embedded_media_type(&bytes).ok_or_else(|| Error::Unexpected {
                image: self.name.image.clone(),
                registry: self.name.domain.clone(),
                what: what.clone(),
                expected: "an OCI or docker v2 schema 2 manifest or index",
            })?,
        };
        let descriptor = Descriptor {
            media_type,
            digest: digest.clone(),
            size: bytes.len() as i64,
            annotations: Default::default(),
            platform: None,
        };
        self.resolved = Some((digest, bytes));
        Ok(descriptor)
    }

    pub fn store_error(&self, source: store::Error) -> Error {
        Error::Store { image: self.name.image.clone(), registry: self.name.domain.clone(), source }
    }

    /// GET with the authorization so far; a `401` is answered once with a challenge.
    async fn get(&self, url: &str, accept: &str, what: &str) -> Result<Response, Error> {
        let mut challenged = false;
        loop {
            let authorization = self.lock().clone();
            let mut request = self.http.get(url).header(header::ACCEPT, accept);
            if let Some(authorization) = authorization {
                request = request.header(header::AUTHORIZATION, authorization);
            }
            let response = request.send().await.map_err(|e| self.unreachable(url, e))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            match status {
                StatusCode::UNAUTHORIZED if !challenged => {
                    challenged = true;
                    let authorization = self.authorize(&response).await?;
                    *self.lock() = Some(authorization);
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(self.unauthorized(format!("{status} for {what}")));
                }
                StatusCode::NOT_FOUND => {
                    return Err(Error::NotFound {
                        image: self.name.image.clone(),
                        registry: self.name.domain.clone(),
                        what: what.to_owned(),
                    });
                }
                _ => {
                    return Err(Error::Status {
                        image: self.name.image.clone(),
                        registry: self.name.domain.clone(),
                        what: what.to_owned(),
                        status: status.as_u16(),
                    });
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HeaderValue>> {
        self.authorization.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The whole body, at most [`MAX_DOCUMENT`] bytes.
    async fn read_document(&self, mut response: Response, what: &str) -> Result<Vec<u8>, Error> {
        let url = response.url().to_string();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(&url, e))? {
            if (bytes.len() + chunk.len()) as u64 > MAX_DOCUMENT {
                return Err(Error::Unexpected {
                    image: self.name.image.clone(),
                    registry: self.name.domain.clone(),
                    what: what.to_owned(),
                    expected: "a document of at most 16 MiB",
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// The URL of a blob, or of a manifest for manifests and indexes.
    fn url_of(&self, descriptor: &Descriptor) -> (String, String) {
        match layout::kind(&descriptor.media_type) {
            Kind::Index | Kind::Manifest => (
                format!("{}/manifests/{}", self.base, descriptor.digest),
                format!("manifest {}", descriptor.digest),
            ),
            Kind::Other => (
                format!("{}/blobs/{}", self.base, descriptor.digest),
                format!("blob {}", descriptor.digest),
            ),
        }
    }

    fn unreachable(&self, url: &str, source: reqwest::Error) -> Error {
        Error::Unreachable {
            image: self.name.image.clone(),
            registry: self.name.domain.clone(),
            url: url.to_owned(),
            source,
        }
    }

    fn unauthorized(&self, detail: String) -> Error {
        Error::Unauthorized {
            image: self.name.image.clone(),
            registry: self.name.domain.clone(),
            detail,
        }
    }

    fn digest_error(&self, what: &str, expected: String, actual: String) -> Error {
        Error::Digest {
            image: self.name.image.clone(),
            registry: self.name.domain.clone(),
            what: what.to_owned(),
            expected,
            actual,
        }
    }
}

impl Blobs for Repository {
    type Error = Error;

    async fn document(&self, descriptor: &Descriptor) -> Result<Vec<u8>, Error> {
        if let Some((digest, bytes)) = &self.resolved
            && *digest == descriptor.digest
        {
            return Ok(bytes.clone());
        }
        let (url, what) = self.url_of(descriptor);
        let accept = if layout::kind(&descriptor.media_type) == Kind::Other {
            "*/*".to_owned()
        } else {
            MANIFEST_TYPES.join(", ")
        };
        let response = self.get(&url, &accept, &what).await?;
        let bytes = self.read_document(response, &what).await?;
        let digest = layout::sha256_digest(&bytes);
        if digest != descriptor.digest {
            return Err(self.digest_error(&what, descriptor.digest.clone(), digest));
        }
        Ok(bytes)
    }

    async fn chunks(&self, descriptor: &Descriptor) -> Result<Chunks, Error> {
        let (url, what) = self.url_of(descriptor);
        let response = self.get(&url, "*/*", &what).await?;
        // containerd checks the digest and size of what arrives when it commits.
        let chunks = futures::stream::unfold(Some(response), |response| async move {
            let mut response = response?;
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk.to_vec()), Some(response))),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            }
        });
        Ok(chunks.boxed())
    }

    fn error(&self, error: tree::Error) -> Error {
        match error {
            tree::Error::Store(source) => self.store_error(source),
            source => Error::Content {
                image: self.name.image.clone(),
                registry: self.name.domain.clone(),
                source,
            },
        }
    }
}

/// The `mediaType` a manifest or index carries in its JSON, or, lacking one, what its
/// fields say it is.
fn embedded_media_type(bytes: &[u8]) -> Option<String> {
    let document: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let declared = document.get("mediaType").and_then(|t| t.as_str());
    match declared {
        Some(media_type) if layout::kind(media_type) != Kind::Other => Some(media_type.to_owned()),
        Some(_) => None,
        None if document.get("manifests").is_some() => Some(layout::OCI_INDEX.to_owned()),
        None if document.get("config").is_some() => Some(layout::OCI_MANIFEST.to_owned()),
        None => None,
    }
}
