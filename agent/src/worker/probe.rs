//! Running a probe's or a hook's [`Handler`] (P5): `exec` in the container through the
//! runtime, `httpGet` (HTTP or HTTPS without a certificate check, kubelet's headers and
//! redirect rules), `tcpSocket`, `grpc` (`grpc.health.v1.Health/Check`), and a hook's
//! `sleep`. Each run is one future bounded by its timeout; the pod worker decides when
//! to run it and what its result means. Failures are worded as kubelet's prober words
//! them (its Go errors: `dial tcp 10.0.0.7:8080: connect: connection refused`), since
//! operators search for those.

mod grpc;
mod http;
mod tcp;

use std::time::Duration;

use outpost_core::probe::{Handler, Outcome};
use tokio::time::Instant;

use super::pod_runtime::PodRuntime;
use crate::error_chain::describe;
use crate::runtime::exec;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot set up the probes' HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot set up TLS for the probes' HTTP client")]
    Tls(#[source] rustls::Error),
    /// `httpGet.httpHeaders`: a name that is no HTTP header name (Go's words, as the
    /// probe's failure says them).
    #[error("net/http: invalid header field name {0:?}")]
    HeaderName(String),
    /// `httpGet.httpHeaders`: the value of header `0` is no HTTP header value.
    #[error("net/http: invalid header field value for {0:?}")]
    HeaderValue(String),
    /// `tcpSocket`: the host name cannot be looked up.
    #[error("dial tcp: lookup {host}: {source}")]
    Lookup {
        host: String,
        #[source]
        source: std::io::Error,
    },
    /// `tcpSocket`: the host name has no address.
    #[error("dial tcp: lookup {host}: no such host")]
    NoHost { host: String },
    /// `tcpSocket`: no connection to `address` (the last one tried).
    #[error("dial tcp {address}: connect: {}", os_error(source))]
    Connect {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What every probe run shares (the HTTP client: no connection pool, no certificate
/// check, kubelet's redirect rules).
#[derive(Debug, Clone)]
pub struct Prober {
    http: http::Client,
}

impl Prober {
    pub fn new() -> Result<Prober, Error> {
        Ok(Prober { http: http::Client::new()? })
    }

    /// Runs `handler` against container `container_id` within `timeout`; a timeout or
    /// an error is a failure with kubelet's message. A `sleep` hook longer than
    /// `timeout` is cut short there, a failure as kubelet has it.
    pub async fn run<R: PodRuntime>(
        &self,
        runtime: &R,
        container_id: &str,
        handler: &Handler,
        timeout: Duration,
    ) -> Outcome {
        let deadline = Instant::now() + timeout;
        match handler {
            Handler::Exec { command } => exec(runtime, container_id, command, timeout).await,
            Handler::HttpGet(get) => self.http.get(get, deadline).await,
            Handler::TcpSocket { host, port } => tcp::connect(host, *port, deadline).await,
            Handler::Grpc { host, port, service } => {
                grpc::check(host, *port, service, deadline, timeout).await
            }
            Handler::Sleep(duration) => sleep(*duration, timeout).await,
        }
    }
}

/// `User-Agent` of HTTP and gRPC probes: `kube-probe/<major>.<minor>` of the Kubernetes
/// version Outpost reports.
fn user_agent() -> String {
    let version = outpost_core::node_status::KUBERNETES_VERSION;
    let minor = version.rsplit_once('.').map_or(version, |(major_minor, _patch)| major_minor);
    format!("kube-probe/{minor}")
}

/// kubelet's exec prober: exit 0 is a success; otherwise the command's output is the
/// message (what the `Unhealthy` event shows).
async fn exec<R: PodRuntime>(
    runtime: &R,
    container_id: &str,
    command: &[String],
    timeout: Duration,
) -> Outcome {
    match runtime.exec(container_id, command, timeout).await {
        Ok(done) if done.exit_code == 0 => Outcome::Success,
        Ok(done) => Outcome::Failure(String::from_utf8_lossy(&done.output).trim().to_owned()),
        Err(exec::Error::TimedOut { .. }) => {
            Outcome::Failure(format!("command {:?} timed out", command.join(" ")))
        }
        Err(e) => Outcome::Failure(describe(&e)),
    }
}

/// A `sleep` hook; past `timeout` (the container is being stopped) it ends as kubelet's.
async fn sleep(duration: Duration, timeout: Duration) -> Outcome {
    if duration <= timeout {
        tokio::time::sleep(duration).await;
        Outcome::Success
    } else {
        tokio::time::sleep(timeout).await;
        Outcome::Failure("container terminated before sleep hook finished".to_owned())
    }
}

/// An OS error as Go words it (`connection refused`): the C library's text with a
/// lower-case first letter, without Rust's `(os error 111)`.
fn os_error(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => {
            let text = nix::errno::Errno::from_raw(code).desc();
            let mut chars = text.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_lowercase().chain(chars).collect::<String>()
            })
        }
        None => error.to_string(),
    }
}

/// `host:port`, an IPv6 host bracketed (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// A duration as Go prints it (`1s`, `1.5s`, `500ms`, `1m30s`).
fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        return format!("{d:?}");
    }
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    // f64's Display: `30`, `0.5`.
    let seconds = Duration::new(seconds, d.subsec_nanos()).as_secs_f64();
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else {
        format!("{minutes}m{seconds}s")
    }
}

#[cfg(test)]
mod tests;
