//! `httpGet` as kubelet's prober runs it: a new connection per probe (`Connection:
//! close`, no pool), HTTPS without a certificate check, `User-Agent: kube-probe/1.x` and
//! `Accept: */*` unless the probe sets its own, a `Host` header as the request's host, up
//! to 10 redirects followed on the same host, one to another host not followed (a
//! warning), at most 10 KiB of the body read. 200–399 is a success.

use std::sync::Arc;

use outpost_core::probe::{HttpGet, Outcome};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::redirect::{Action, Attempt, Policy};
use tokio::time::{Instant, timeout_at};

use super::{Error, os_error};

/// How much of a response's body is read (kubelet's limit).
const MAX_BODY: usize = 10 * 1024;
/// Redirects followed on the same host before the probe fails.
const MAX_REDIRECTS: usize = 10;

/// The probes' one HTTP client.
#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    user_agent: HeaderValue,
}

impl Client {
    pub(super) fn new() -> Result<Client, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(Error::Tls)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(
                crate::insecure_skip_verify::AnyServerCertificate::new(provider),
            ))
            .with_no_client_auth();
        // HTTP/1.1 only, as kubelet's probes.
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .pool_max_idle_per_host(0)
            // Probes go to the pod (or the host named), never through a proxy.
            .no_proxy()
            .redirect(Policy::custom(redirect))
            .build()
            .map_err(Error::Client)?;
        let user_agent = HeaderValue::try_from(super::user_agent())
            .unwrap_or_else(|_| HeaderValue::from_static("kube-probe"));
        Ok(Client { http, user_agent })
    }

    /// Runs the probe; `deadline` bounds it all (connection, headers, body).
    pub(super) async fn get(&self, get: &HttpGet, deadline: Instant) -> Outcome {
        let url = get.url();
        let headers = match self.headers(&get.headers) {
            Ok(headers) => headers,
            Err(e) => return Outcome::Failure(format!("Get {url:?}: {e}")),
        };
        let response = match timeout_at(deadline, self.http.get(&url).headers(headers).send()).await
        {
            Err(_) => {
                return Outcome::Failure(format!(
                    "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                ));
            }
            Ok(Err(e)) => return Outcome::Failure(request_error(&url, &e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let redirect = status.is_redirection();
        let body = match timeout_at(deadline, read_body(response, redirect)).await {
            Err(_) => {
                return Outcome::Failure(format!(
                    "Get {url:?}: context deadline exceeded (Client.Timeout or context cancellation while reading body)"
                ));
            }
            Ok(Err(e)) => return Outcome::Failure(format!("Get {url:?}: {}", cause(&e))),
            Ok(Ok(body)) => body,
        };
        match status.as_u16() {
            200..=299 => Outcome::Success,
            300..=399 => Outcome::Warning(format!(
                "Probe terminated redirects, Response body: {}",
                String::from_utf8_lossy(&body)
            )),
            code => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
        }
    }

    /// The probe's headers, then kubelet's `User-Agent` and `Accept: */*` where the probe
    /// sets none, and `Connection: close`.
    fn headers(&self, probe: &[(String, String)]) -> Result<HeaderMap, Error> {
        let mut headers = HeaderMap::with_capacity(probe.len() + 3);
        for (name, value) in probe {
            let name =
                HeaderName::try_from(name.as_str()).map_err(|_| Error::HeaderName(name.clone()))?;
            let value = HeaderValue::try_from(value.as_str())
                .map_err(|_| Error::HeaderValue(name.as_str().to_owned()))?;
            headers.append(name, value);
        }
        match headers.get(header::USER_AGENT) {
            None => {
                headers.insert(header::USER_AGENT, self.user_agent.clone());
            }
            // Set empty: none sent.
            Some(agent) if agent.is_empty() => {
                headers.remove(header::USER_AGENT);
            }
            Some(_) => {}
        }
        // Set empty, kubelet sends none; reqwest would then send `*/*`, so it goes empty.
        if !headers.contains_key(header::ACCEPT) {
            headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        }
        // An empty Host is the URL's host.
        if headers.get(header::HOST).is_some_and(HeaderValue::is_empty) {
            headers.remove(header::HOST);
        }
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        Ok(headers)
    }
}

/// Up to [`MAX_BODY`] of the body, kept only when `keep` (a redirect's body goes into
/// the warning); the rest is left unread.
async fn read_body(mut response: reqwest::Response, keep: bool) -> reqwest::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut read = 0;
    while read < MAX_BODY {
        let Some(chunk) = response.chunk().await? else { break };
        let take = chunk.len().min(MAX_BODY - read);
        read += take;
        if keep {
            body.extend_from_slice(&chunk[..take]);
        }
    }
    Ok(body)
}

/// kubelet's redirect rule: follow on the same host (by name, any port), up to
/// [`MAX_REDIRECTS`]; stop at another host (the redirect itself is the response).
fn redirect(attempt: Attempt<'_>) -> Action {
    let previous = attempt.previous();
    let first_host = previous.first().and_then(|first| first.host_str());
    if first_host.is_some_and(|host| attempt.url().host_str() != Some(host)) {
        attempt.stop()
    } else if previous.len() >= MAX_REDIRECTS {
        attempt.error(TooManyRedirects)
    } else {
        attempt.follow()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("stopped after {MAX_REDIRECTS} redirects")]
struct TooManyRedirects;

/// A request that got no response, as Go's client words it:
/// `Get "http://10.0.0.7:8080/": dial tcp 10.0.0.7:8080: connect: connection refused`.
fn request_error(url: &str, error: &reqwest::Error) -> String {
    let url = error.url().map_or(url, reqwest::Url::as_str);
    let host = error.url().and_then(reqwest::Url::host_str).unwrap_or_default();
    if error.is_connect() && mentions(error, "dns error") {
        return format!("Get {url:?}: dial tcp: lookup {host}: {}", cause(error));
    }
    if error.is_connect()
        && let Some(io) = innermost::<std::io::Error>(error)
        && io.raw_os_error().is_some()
    {
        let port = error.url().and_then(reqwest::Url::port_or_known_default).unwrap_or_default();
        return format!("Get {url:?}: dial tcp {host}:{port}: connect: {}", os_error(io));
    }
    format!("Get {url:?}: {}", cause(error))
}

/// The innermost cause of `error` of type `E`.
fn innermost<'a, E: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut found = None;
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<E>() {
            found = Some(e);
        }
        next = e.source();
    }
    found
}

/// Whether one of the errors in `error`'s chain says `text`.
fn mentions(error: &(dyn std::error::Error + 'static), text: &str) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.to_string() == text {
            return true;
        }
        next = e.source();
    }
    false
}

/// The innermost cause's text (reqwest's own wrappers say only "error sending request").
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last = error;
    while let Some(source) = last.source() {
        last = source;
    }
    last.to_string()
}
