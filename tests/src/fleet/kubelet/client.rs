//! The model's REST client: client-go's as kubelet uses it, over one `kube::Client`
//! per node (its own connection pool). JSON only (kubelet speaks protobuf; the test
//! server serves JSON). A 429 (or 5xx) with `Retry-After` is retried after that many
//! seconds, up to 10 times, as client-go's `rest.Request` does (`maxRetries` 10,
//! `checkWait`); every other failure goes back to the caller, which retries on its
//! own clock as kubelet's component does.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use hyper::{Method, Request, StatusCode};
use kube::client::Body;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// client-go's `rest.Request` retries on `Retry-After` at most this many times.
const MAX_RETRIES: u32 = 10;

/// A request that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{method} {path}: cannot reach the API server: {source}")]
    Unreachable {
        method: Method,
        path: String,
        #[source]
        source: kube::Error,
    },
    #[error("{method} {path}: the API server answered {code} {reason}: {message}")]
    Status { method: Method, path: String, code: u16, reason: String, message: String },
    #[error("{method} {path}: cannot read the answer: {detail}")]
    Body { method: Method, path: String, detail: String },
    #[error("{method} {path}: no answer within {timeout:?}")]
    Timeout { method: Method, path: String, timeout: Duration },
    #[error("{method} {path}: gave up after {tries} tries")]
    GaveUp { method: Method, path: String, tries: u32 },
    #[error("{what} is not in the informer's cache yet")]
    NotCached { what: String },
    #[error("cannot make a client configuration for the API server: {0}")]
    Config(String),
    #[error("cannot make the client for {url}: {source}")]
    Client {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("{method} {path}: stopped")]
    Stopped { method: Method, path: String },
}

impl Error {
    /// The HTTP status the server answered, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// 409 `Conflict` (a stale resourceVersion), not `AlreadyExists`.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Status { code: 409, reason, .. } if reason == "Conflict")
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::Status { code: 409, reason, .. } if reason == "AlreadyExists")
    }

    /// 410 `Expired`/`Gone`: the resourceVersion left the server's history.
    pub fn is_expired(&self) -> bool {
        self.code() == Some(410)
    }

    /// What client-go's `isWatchErrorRetriable` accepts: the connection was refused
    /// (the server is most likely down, so the watch is retried, not re-listed) or 429.
    pub fn is_watch_retriable(&self) -> bool {
        match self {
            Error::Unreachable { source, .. } => refused(source),
            Error::Status { code, .. } => *code == 429,
            _ => false,
        }
    }
}

/// Whether `error`'s chain holds an `io::Error` of kind `ConnectionRefused`.
fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// One node's client.
#[derive(Clone)]
pub struct Client {
    kube: kube::Client,
    stop: CancellationToken,
    /// How long a request may wait for its answer (none for the informers' client).
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// An answer's body, read whole.
type Answer = (StatusCode, Bytes);

impl Client {
    /// A client of the server `config` names, giving up on `stop`: its own connection,
    /// HTTP/2 over TLS as client-go's.
    pub fn new(config: &kube::Config, stop: CancellationToken) -> Result<Client, Error> {
        let url = config.cluster_url.to_string();
        let kube = outpost::apiserver::transport::client(config.clone())
            .map_err(|source| Error::Client { url, source })?;
        Ok(Client { kube, stop, timeout: None })
    }

    /// The same client (the same connections) with a timeout on each request: kubelet's
    /// `heartbeatClient`, whose timeout is `nodeStatusUpdateFrequency` (10 s), for the
    /// node status and the Lease.
    pub fn with_timeout(&self, timeout: Duration) -> Client {
        Client { timeout: Some(timeout), ..self.clone() }
    }

    /// GET `path` (with its query).
    pub async fn get(&self, path: &str) -> Result<Value, Error> {
        self.json(Method::GET, path, None, None).await
    }

    /// POST `object` to the collection `path`.
    pub async fn create(&self, path: &str, object: &Value) -> Result<Value, Error> {
        self.json(Method::POST, path, Some(object), Some("application/json")).await
    }

    /// PUT `object` to `path` (an update, with its resourceVersion as precondition).
    pub async fn update(&self, path: &str, object: &Value) -> Result<Value, Error> {
        self.json(Method::PUT, path, Some(object), Some("application/json")).await
    }

    /// PATCH `path` with a JSON merge patch.
    pub async fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, Error> {
        self.json(Method::PATCH, path, Some(patch), Some("application/merge-patch+json")).await
    }

    /// DELETE `path` with `options` (a `DeleteOptions`).
    pub async fn delete(&self, path: &str, options: &Value) -> Result<Value, Error> {
        self.json(Method::DELETE, path, Some(options), Some("application/json")).await
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        content_type: Option<&str>,
    ) -> Result<Value, Error> {
        let response = self.send(method.clone(), path, body, content_type).await?;
        let bytes = read(&method, path, response.into_body()).await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Body {
            method,
            path: path.to_owned(),
            detail: e.to_string(),
        })
    }

    /// Sends a request, waiting out `Retry-After` as client-go does; a non-2xx answer
    /// becomes [`Error::Status`].
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        content_type: Option<&str>,
    ) -> Result<hyper::Response<Body>, Error> {
        let payload = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let mut retries = 0;
        loop {
            let mut request = Request::builder().method(method.clone()).uri(path);
            if let Some(content_type) = content_type {
                request = request.header(hyper::header::CONTENT_TYPE, content_type);
            }
            request = request.header(hyper::header::ACCEPT, "application/json");
            let request = request.body(Body::from(payload.clone())).map_err(|e| Error::Body {
                method: method.clone(),
                path: path.to_owned(),
                detail: e.to_string(),
            })?;
            let limit = self.timeout.unwrap_or(Duration::MAX);
            let sent = tokio::select! {
                sent = tokio::time::timeout(limit, self.kube.send(request)) => match sent {
                    Ok(sent) => sent,
                    Err(_) => {
                        return Err(Error::Timeout { method, path: path.to_owned(), timeout: limit });
                    }
                },
                () = self.stop.cancelled() => {
                    return Err(Error::Stopped { method, path: path.to_owned() });
                }
            };
            let response = sent.map_err(|source| Error::Unreachable {
                method: method.clone(),
                path: path.to_owned(),
                source,
            })?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get(hyper::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
            let (code, bytes) = (status, read(&method, path, response.into_body()).await?);
            let retriable = code == StatusCode::TOO_MANY_REQUESTS || code.is_server_error();
            if let (true, Some(seconds)) = (retriable && retries < MAX_RETRIES, retry_after) {
                retries += 1;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(seconds)) => continue,
                    () = self.stop.cancelled() => {
                        return Err(Error::Stopped { method, path: path.to_owned() });
                    }
                }
            }
            return Err(status_error(method, path, (code, bytes)));
        }
    }

    /// Opens a watch (`path` with `watch=true` in its query): its events, one JSON
    /// object each, until the server ends the stream or the connection breaks (both end
    /// the stream; a broken connection is a "probable EOF" to client-go, not an error).
    pub async fn watch(&self, path: &str) -> Result<impl Stream<Item = Value> + use<>, Error> {
        let response = self.send(Method::GET, path, None, None).await?;
        let chunks = response.into_body().into_data_stream();
        let lines = futures::stream::unfold(
            (chunks, BytesMut::new(), false),
            |(mut chunks, mut buffer, mut ended)| async move {
                loop {
                    if let Some(at) = buffer.iter().position(|b| *b == b'\n') {
                        let line = buffer.split_to(at + 1);
                        match serde_json::from_slice::<Value>(&line[..at]) {
                            Ok(event) => return Some((event, (chunks, buffer, ended))),
                            Err(_) => continue,
                        }
                    }
                    if ended {
                        return None;
                    }
                    match chunks.next().await {
                        Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                        Some(Err(_)) | None => ended = true,
                    }
                    if ended && !buffer.is_empty() && !buffer.ends_with(b"\n") {
                        buffer.extend_from_slice(b"\n");
                    }
                }
            },
        );
        Ok(lines)
    }
}

async fn read(method: &Method, path: &str, body: Body) -> Result<Bytes, Error> {
    body.collect().await.map(|collected| collected.to_bytes()).map_err(|e| Error::Body {
        method: method.clone(),
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// A non-2xx answer as an error, with the `metav1.Status` reason when the body has one.
fn status_error(method: Method, path: &str, (code, bytes): Answer) -> Error {
    let status: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Error::Status {
        method,
        path: path.to_owned(),
        code: code.as_u16(),
        reason: status["reason"].as_str().unwrap_or_default().to_owned(),
        message: status["message"].as_str().unwrap_or_default().to_owned(),
    }
}

/// `path?query` from key-value pairs, form-encoded.
pub fn with_query(path: &str, query: &[(&str, &str)]) -> String {
    if query.is_empty() {
        return path.to_owned();
    }
    let mut encoded = form_urlencoded::Serializer::new(String::new());
    for (key, value) in query {
        encoded.append_pair(key, value);
    }
    format!("{path}?{}", encoded.finish())
}

/// The time now as `metav1.Time` (seconds) and as `metav1.MicroTime`.
pub fn now() -> (String, String) {
    let now = jiff::Timestamp::now();
    let seconds = now.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let micros = now.subsec_microsecond().max(0);
    (format!("{seconds}Z"), format!("{seconds}.{micros:06}Z"))
}
