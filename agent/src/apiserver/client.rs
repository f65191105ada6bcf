//! The API server client of the writers and the API source: kube-rs's [`kube::Client`]
//! (its auth, TLS and kubeconfig handling) with Outpost's own policy on top. Each request
//! waits for a token of one shared bucket (kubelet's QPS 50, burst 100); each answer or
//! failure updates [`Connectivity`]; an error keeps the server's `Retry-After`. kube's
//! own retry layer is turned off where the client is built
//! ([`ApiClient::from_kubeconfig`]): retries are the callers' decision, with jittered
//! exponential backoff, so nothing is sent in a loop behind their back.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use kube::config::KubeConfigOptions;
use outpost_core::backoff::Backoff;
use outpost_core::pace::{MAX_RETRY_AFTER, TokenBucket, spread_window};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::{Connectivity, lock};

/// The largest response body read (the biggest expected is a Node or a Pod).
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Why the client could not be made from the kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("kubeconfig {path}: {source}; check the file given with --kubeconfig")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: super::kubeconfig::ReadError,
    },
    #[error("cannot build the API server client from {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: kube::Error,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("cannot reach the API server {server}: {source}")]
    Unreachable {
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("the API server answered {code} {reason}: {message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
        /// The server's `Retry-After`, in seconds (429, 503).
        retry_after: Option<Duration>,
    },
    #[error("cannot read the API server's answer: {0}")]
    Body(String),
    #[error("cannot decode the API server's answer: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("cannot build the request: {0}")]
    Request(#[source] kube::core::request::Error),
}

impl CallError {
    /// The HTTP status of an error answer.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// 409: `AlreadyExists` on create, `Conflict` on a stale resourceVersion or a failed
    /// UID precondition.
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            CallError::Status { reason, .. } => Some(reason),
            _ => None,
        }
    }

    pub fn is_already_exists(&self) -> bool {
        self.reason() == Some("AlreadyExists")
    }

    /// The request did not reach the server (nothing to do but wait for it).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, CallError::Unreachable { .. })
    }

    /// How long to wait before retrying after this error: the server's `Retry-After`
    /// if it gave one (and it is longer, up to [`MAX_RETRY_AFTER`]), else the backoff's
    /// next jittered delay.
    pub fn retry_delay(&self, backoff: &mut Backoff) -> Duration {
        let delay = backoff.next_delay(fastrand::f64());
        match self {
            CallError::Status { retry_after: Some(after), .. } => {
                delay.max((*after).min(MAX_RETRY_AFTER))
            }
            _ => delay,
        }
    }
}

/// What one writer has seen of the server's returns, to spread what waited after each
/// (B13, [`outpost_core::pace::spread_window`]).
#[derive(Debug, Default)]
pub struct Reconnects {
    count: u64,
    refusals: u64,
}

impl Reconnects {
    /// The spread window of the server's last return if this writer has not seen it yet
    /// (zero after a short outage; `None`: nothing new). It grows with the time away and
    /// with the refusals for load the client met since the return before.
    pub fn next_window(&mut self, client: &ApiClient) -> Option<Duration> {
        let reconnect = client.connectivity().last_reconnect();
        if reconnect.count == self.count {
            return None;
        }
        self.count = reconnect.count;
        let refusals = client.refusals();
        let met = u32::try_from(refusals.saturating_sub(self.refusals)).unwrap_or(u32::MAX);
        self.refusals = refusals;
        Some(spread_window(reconnect.away, met))
    }
}

/// A client's token bucket (kubelet's QPS and burst), shared by the client's clones and
/// by the watchers of its kube client: one pace for a node's writes, lists and watches,
/// slowed by the server's refusals for load and honouring their `Retry-After` (B13).
///
/// Without a bucket ([`Pacer::unthrottled`]) it waits for nothing: kubelet's heartbeat
/// client (QPS -1), paced by the Lease's own renew interval and backoff.
#[derive(Clone)]
pub struct Pacer(Option<Arc<Mutex<(Instant, TokenBucket)>>>);

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rate = self.0.as_ref().map(|bucket| lock(bucket).1.rate());
        f.debug_tuple("Pacer").field(&rate).finish()
    }
}

impl Pacer {
    /// `rate` requests a second after a burst of `burst`.
    pub fn new(rate: f64, burst: u32) -> Pacer {
        let bucket = TokenBucket::new(rate, burst, Duration::ZERO);
        Pacer(Some(Arc::new(Mutex::new((Instant::now(), bucket)))))
    }

    /// No bucket: every request goes at once, and refusals slow nothing down.
    pub fn unthrottled() -> Pacer {
        Pacer(None)
    }

    /// Waits for a token.
    pub async fn ready(&self) {
        let Some(bucket) = &self.0 else { return };
        let wait = {
            let mut guard = lock(bucket);
            let (origin, bucket) = &mut *guard;
            bucket.take(origin.elapsed())
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }

    /// The server's answer tells the bucket its pace: a 429 (flow control) slows it and
    /// holds it for the `Retry-After`, any other answer lets it grow back.
    pub fn answered(&self, status: http::StatusCode, retry_after: Option<Duration>) {
        let Some(bucket) = &self.0 else { return };
        let mut guard = lock(bucket);
        let (origin, bucket) = &mut *guard;
        if status == http::StatusCode::TOO_MANY_REQUESTS {
            bucket.refused(origin.elapsed(), retry_after.unwrap_or_default());
        } else {
            bucket.answered(origin.elapsed());
        }
    }

    /// Refusals for load (429) met so far.
    pub fn refusals(&self) -> u64 {
        self.0.as_ref().map_or(0, |bucket| lock(bucket).1.refusals())
    }
}

/// A cloneable handle: all clones share the bucket and the connectivity flag.
#[derive(Clone)]
pub struct ApiClient {
    client: kube::Client,
    server: String,
    connectivity: Connectivity,
    pacer: Pacer,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient").field("server", &self.server).finish_non_exhaustive()
    }
}

impl ApiClient {
    /// Reads the kubeconfig and builds the client (token, client certificates and exec
    /// plugins are kube's). Makes no request: the API server may well be unreachable.
    pub async fn from_kubeconfig(
        path: &Path,
        connectivity: Connectivity,
    ) -> Result<ApiClient, ConfigError> {
        let (client, server) = ApiClient::kube_client(path).await?;
        Ok(ApiClient::new(client, server, connectivity))
    }

    /// The kube client of the kubeconfig at `path`, with kube's retries off, and the
    /// server's URL.
    pub async fn kube_client(path: &Path) -> Result<(kube::Client, String), ConfigError> {
        let kubeconfig = super::kubeconfig::read(path)
            .map_err(|source| ConfigError::Kubeconfig { path: path.into(), source })?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|source| ConfigError::Kubeconfig {
                path: path.into(),
                source: source.into(),
            })?;
        // Retries are ours (jittered backoff, Retry-After), not hidden in the client.
        config.default_retry = false;
        let server = config.cluster_url.to_string();
        let client = super::transport::client(config)
            .map_err(|source| ConfigError::Client { path: path.into(), source })?;
        Ok((client, server))
    }

    pub fn new(client: kube::Client, server: String, connectivity: Connectivity) -> ApiClient {
        let (rate, burst) = TokenBucket::KUBELET;
        ApiClient::with_pace(client, server, connectivity, rate, burst)
    }

    /// A client with another pace than kubelet's (`rate` requests per second after a
    /// burst of `burst`).
    pub fn with_pace(
        client: kube::Client,
        server: String,
        connectivity: Connectivity,
        rate: f64,
        burst: u32,
    ) -> ApiClient {
        ApiClient { client, server, connectivity, pacer: Pacer::new(rate, burst) }
    }

    /// The kube client (for the API source's list and watch).
    pub fn kube(&self) -> &kube::Client {
        &self.client
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn connectivity(&self) -> &Connectivity {
        &self.connectivity
    }

    /// Sends a request built with [`kube::core::Request`] and decodes the answer.
    pub async fn call<T: DeserializeOwned>(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<T, CallError> {
        let body = self.send(request).await?;
        crate::json::from_slice(&body).map_err(CallError::Decode)
    }

    /// Sends a request and returns the body of a 2xx answer.
    pub async fn send(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<Vec<u8>, CallError> {
        let request = request.map_err(CallError::Request)?;
        let write = !matches!(*request.method(), http::Method::GET | http::Method::HEAD);
        self.pacer.ready().await;
        let response = match self.client.send(request.map(kube::client::Body::from)).await {
            Ok(response) => response,
            Err(source) => {
                self.connectivity.unreachable(&source.to_string());
                return Err(CallError::Unreachable { server: self.server.clone(), source });
            }
        };
        self.connectivity.reachable();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        self.pacer.answered(response.status(), retry_after);
        if write {
            self.connectivity.write_answered(response.status());
        }
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| CallError::Body(e.to_string()))?
            .to_bytes()
            .to_vec();
        if parts.status.is_success() {
            return Ok(body);
        }
        let status: Option<kube::core::Status> = serde_json::from_slice(&body).ok();
        Err(CallError::Status {
            code: parts.status.as_u16(),
            reason: status
                .as_ref()
                .map(|s| s.reason.clone())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| parts.status.canonical_reason().unwrap_or("").to_owned()),
            message: status.map(|s| s.message).unwrap_or_else(|| {
                String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
            }),
            retry_after,
        })
    }

    /// The same client (connections, credentials, connectivity) without a bucket:
    /// kubelet's heartbeat client (the Lease and the Node status), whose client-side
    /// throttling is off (QPS -1). The Lease is not queued behind a backlog of status
    /// writes, and the refusals those meet do not slow it: a bucket that halved on each
    /// 429 held the Lease's renewals 20 s apart and longer, past its 40 s, when a fleet
    /// came back to a throttled server (B13). The Lease paces itself: one renewal per
    /// renew interval, retries on its backoff.
    pub fn heartbeat(&self) -> ApiClient {
        ApiClient {
            client: self.client.clone(),
            server: self.server.clone(),
            connectivity: self.connectivity.clone(),
            pacer: Pacer::unthrottled(),
        }
    }

    /// Refusals for load (429) this client's bucket met so far.
    pub fn refusals(&self) -> u64 {
        self.pacer.refusals()
    }

    /// The client's bucket, for the watchers of [`ApiClient::kube`] to share its pace.
    pub fn pacer(&self) -> Pacer {
        self.pacer.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry_after: Option<u64>) -> CallError {
        CallError::Status {
            code,
            reason: "TooManyRequests".to_owned(),
            message: "slow down".to_owned(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn retry_after_is_honoured_when_longer_than_the_backoff() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        assert_eq!(status(429, Some(4)).retry_delay(&mut backoff), Duration::from_secs(4));
        // A Retry-After of a day waits the cap, not the day.
        let mut day = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        assert_eq!(status(429, Some(86_400)).retry_delay(&mut day), MAX_RETRY_AFTER);
        // The backoff still advanced (1 s taken): the next nominal delay is 2 s.
        assert_eq!(backoff.nominal(), Duration::from_secs(2));
        // A Retry-After shorter than the backoff does not shorten it.
        let mut backoff = Backoff::new(Duration::from_secs(8), Duration::from_secs(30));
        let delay = status(503, Some(1)).retry_delay(&mut backoff);
        assert!(delay >= Duration::from_secs(4) && delay <= Duration::from_secs(8), "{delay:?}");
        // Without one: the jittered backoff, [base / 2, base].
        let mut backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(30));
        let delay = status(500, None).retry_delay(&mut backoff);
        assert!(delay >= Duration::from_secs(1) && delay <= Duration::from_secs(2), "{delay:?}");
    }

    #[test]
    fn errors_are_classified_by_code_and_reason() {
        let exists = CallError::Status {
            code: 409,
            reason: "AlreadyExists".to_owned(),
            message: String::new(),
            retry_after: None,
        };
        assert!(exists.is_conflict() && exists.is_already_exists() && !exists.is_not_found());
        let conflict = CallError::Status {
            code: 409,
            reason: "Conflict".to_owned(),
            message: String::new(),
            retry_after: None,
        };
        assert!(conflict.is_conflict() && !conflict.is_already_exists());
        assert!(status(404, None).is_not_found());
        assert!(!status(500, None).is_unreachable());
        assert_eq!(status(429, None).code(), Some(429));
    }
}
