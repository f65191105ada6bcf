//! A manifest URL server for tests: serves one document that tests change at runtime,
//! with switchable validators (ETag, Last-Modified) and 304s, and the ways real servers
//! fail: a garbage body, an error status, a hang, an oversize body, a redirect chain,
//! going down (the listener and every connection dropped) and coming back on the same
//! port. Optionally over TLS, with a CA and server certificate made by `rcgen`.
//!
//! It runs on its own tokio runtime, so tests drive it from plain (blocking) code.

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

/// The document's path.
pub const PATH: &str = "/pods.yaml";
/// The S8 limit the agent enforces (10 MiB).
pub const LIMIT: usize = 10 * 1024 * 1024;

/// How the server answers a request for the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The document, with validators and 304s as configured.
    Serve,
    /// 200 with an HTML error page, as a misconfigured proxy sends.
    Garbage,
    /// This status with a short text body.
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// 200 with a body one byte over [`LIMIT`], with a Content-Length.
    Oversize,
    /// As `Oversize`, chunked (no Content-Length: the client must count).
    OversizeChunked,
}

/// Which validators the server sends (and honours in conditional requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validators {
    None,
    ETag,
    LastModified,
    Both,
}

#[derive(Debug)]
struct Doc {
    body: String,
    version: u64,
}

#[derive(Debug)]
struct Shared {
    doc: Mutex<Doc>,
    mode: Mutex<Mode>,
    validators: Mutex<Validators>,
    /// The headers of the last request for the document.
    last_headers: Mutex<Vec<(String, String)>>,
    requests: AtomicU64,
    ok: AtomicU64,
    not_modified: AtomicU64,
}

/// A running manifest server; stopped on drop.
#[derive(Debug)]
pub struct ManifestServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The CA that signed the server's certificate (PEM), in TLS mode.
    pub ca_pem: Option<String>,
    task: Option<JoinHandle<()>>,
    runtime: tokio::runtime::Runtime,
}

impl ManifestServer {
    /// Serves `body` over HTTP with both validators, on 127.0.0.1 and a free port.
    pub fn start(body: &str) -> ManifestServer {
        ManifestServer::build(body, None, None)
    }

    /// As [`ManifestServer::start`], over HTTPS with a fresh CA ([`ManifestServer::ca_pem`]).
    pub fn start_tls(body: &str) -> ManifestServer {
        let (config, ca_pem) = tls_config();
        ManifestServer::build(body, Some(config), Some(ca_pem))
    }

    fn build(
        body: &str,
        tls: Option<Arc<rustls::ServerConfig>>,
        ca_pem: Option<String>,
    ) -> ManifestServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("cannot start the manifest server's runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("cannot bind the manifest server");
        let addr = listener.local_addr().expect("the manifest server's address");
        let shared = Arc::new(Shared {
            doc: Mutex::new(Doc { body: body.to_owned(), version: 1 }),
            mode: Mutex::new(Mode::Serve),
            validators: Mutex::new(Validators::Both),
            last_headers: Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            not_modified: AtomicU64::new(0),
        });
        let task = runtime.spawn(accept(listener, tls.clone(), shared.clone()));
        ManifestServer { shared, addr, tls, ca_pem, task: Some(task), runtime }
    }

    /// The document's URL.
    pub fn url(&self) -> String {
        self.url_of(PATH)
    }

    /// The URL of any path on this server.
    pub fn url_of(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// A URL that redirects `hops` times before reaching the document.
    pub fn redirect_url(&self, hops: usize) -> String {
        self.url_of(&format!("/redirect/{hops}"))
    }

    /// Replaces the document (new ETag and Last-Modified).
    pub fn set(&self, body: &str) {
        let mut doc = self.shared.doc.lock().expect("doc lock");
        doc.body = body.to_owned();
        doc.version += 1;
    }

    /// Gives the same document new validators, as a server restart or redeploy can.
    pub fn touch(&self) {
        self.shared.doc.lock().expect("doc lock").version += 1;
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().expect("mode lock") = mode;
    }

    pub fn set_validators(&self, validators: Validators) {
        *self.shared.validators.lock().expect("validators lock") = validators;
    }

    /// Requests for the document so far (any answer).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// 200s with the document so far.
    pub fn oks(&self) -> u64 {
        self.shared.ok.load(Ordering::SeqCst)
    }

    /// 304s so far.
    pub fn not_modified(&self) -> u64 {
        self.shared.not_modified.load(Ordering::SeqCst)
    }

    /// The value of header `name` in the last request for the document.
    pub fn last_header(&self, name: &str) -> Option<String> {
        let headers = self.shared.last_headers.lock().expect("headers lock");
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
    }

    /// Closes the listener and every open connection: the port refuses connections.
    pub fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = self.runtime.block_on(task);
        }
    }

    /// Listens again on the same port.
    pub fn up(&mut self) {
        self.down();
        let listener = self
            .runtime
            .block_on(TcpListener::bind(self.addr))
            .expect("cannot bind the manifest server's port again");
        self.task =
            Some(self.runtime.spawn(accept(listener, self.tls.clone(), self.shared.clone())));
    }
}

impl Drop for ManifestServer {
    fn drop(&mut self) {
        self.down();
    }
}

/// Accepts connections until aborted; aborting drops the listener and, with the
/// `JoinSet`, every connection.
async fn accept(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: Arc<Shared>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        while connections.try_join_next().is_some() {}
        let (tls, shared) = (tls.clone(), shared.clone());
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(&shared, request).await) }
            });
            let http = hyper::server::conn::http1::Builder::new();
            match tls {
                Some(config) => {
                    // A client that does not trust the certificate hangs up here.
                    if let Ok(stream) = TlsAcceptor::from(config).accept(stream).await {
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
            }
        });
    }
}

async fn respond(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    if let Some(hops) = path.strip_prefix("/redirect/").and_then(|n| n.parse::<usize>().ok()) {
        let next = if hops <= 1 { PATH.to_owned() } else { format!("/redirect/{}", hops - 1) };
        return Response::builder()
            .status(StatusCode::FOUND)
            .header(header::LOCATION, next)
            .body(Body::empty())
            .expect("a redirect response");
    }
    if path != PATH {
        return text(StatusCode::NOT_FOUND, "no such document\n");
    }
    shared.requests.fetch_add(1, Ordering::SeqCst);
    *shared.last_headers.lock().expect("headers lock") = request
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let mode = *shared.mode.lock().expect("mode lock");
    match mode {
        Mode::Serve => {}
        Mode::Garbage => {
            return text(StatusCode::OK, "<html><body><h1>502 Bad Gateway</h1></body></html>\n");
        }
        Mode::Status(code) => {
            let status = StatusCode::from_u16(code).expect("a valid status code");
            return text(status, "the manifest server is failing on purpose\n");
        }
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Oversize => return oversize(false),
        Mode::OversizeChunked => return oversize(true),
    }
    let (body, version) = {
        let doc = shared.doc.lock().expect("doc lock");
        (doc.body.clone(), doc.version)
    };
    let validators = *shared.validators.lock().expect("validators lock");
    let etag = matches!(validators, Validators::ETag | Validators::Both)
        .then(|| format!("\"v{version}\""));
    let last_modified = matches!(validators, Validators::LastModified | Validators::Both)
        .then(|| http_date(version));
    let asked = |name| request.headers().get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    // RFC 9110 13.2.2: If-None-Match, when present, decides; If-Modified-Since otherwise.
    let unchanged = match asked(header::IF_NONE_MATCH) {
        Some(tags) => etag.as_deref().is_some_and(|e| tags.split(',').any(|t| t.trim() == e)),
        None => asked(header::IF_MODIFIED_SINCE)
            .is_some_and(|since| last_modified.as_deref() == Some(since)),
    };
    let mut response = Response::builder();
    if let Some(etag) = &etag {
        response = response.header(header::ETAG, etag);
    }
    if let Some(date) = &last_modified {
        response = response.header(header::LAST_MODIFIED, date);
    }
    if unchanged {
        shared.not_modified.fetch_add(1, Ordering::SeqCst);
        return response
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .expect("a 304 response");
    }
    shared.ok.fetch_add(1, Ordering::SeqCst);
    response
        .header(header::CONTENT_TYPE, "application/yaml")
        .body(Body::from(body))
        .expect("a document response")
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(body))
        .expect("a text response")
}

/// A valid pod followed by comments, one byte over [`LIMIT`] in all.
fn oversize(chunked: bool) -> Response<Body> {
    let mut body = crate::pod_yaml("huge", "busybox").into_bytes();
    let line = format!("# {}\n", "x".repeat(1021));
    while body.len() + line.len() <= LIMIT {
        body.extend_from_slice(line.as_bytes());
    }
    body.resize(LIMIT + 1, b'#');
    let response = Response::builder().header(header::CONTENT_TYPE, "application/yaml");
    let body = if chunked {
        let chunks: Vec<Result<Vec<u8>, Infallible>> =
            body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
        Body::from_stream(futures::stream::iter(chunks))
    } else {
        Body::from(body)
    };
    response.body(body).expect("an oversize response")
}

/// A distinct, valid HTTP date per document version.
fn http_date(version: u64) -> String {
    let seconds = 1_700_000_000 + i64::try_from(version).unwrap_or(0);
    let at = jiff::Timestamp::from_second(seconds).expect("a valid timestamp");
    at.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// A CA, and a server certificate for 127.0.0.1 and localhost signed by it.
fn tls_config() -> (Arc<rustls::ServerConfig>, String) {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "outpost test manifest CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("a CA certificate");
    let key = rcgen::KeyPair::generate().expect("a server key");
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server params");
    let cert = params.signed_by(&key, &ca).expect("a server certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("a TLS server config");
    (Arc::new(config), ca.pem())
}
