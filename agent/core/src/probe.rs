//! Probes and lifecycle hooks as kubelet runs them (SEMANTICS.md P1–P5, L1–L2), the pure
//! part: what a probe or hook asks for, resolved against its container and pod into a
//! [`Handler`] the agent can run; and each container's [`Probes`], the schedule,
//! thresholds and results that decide whether it has started, is ready, or must be
//! killed. Running a handler (exec, HTTP, TCP, gRPC) is the agent's.

mod schedule;

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use self::schedule::{Probes, Run, Verdict};

/// What in a probe or lifecycle hook cannot be run. The messages name the field (under
/// the probe or hook) and what to set instead; validation reports them per field (A1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "tcpSocket is not a lifecycle hook handler (kubelet runs none); use exec, httpGet or sleep"
    )]
    TcpSocketHook,
    #[error("sleep.seconds {0} is negative")]
    NegativeSleep(i64),
    #[error("no handler: set exactly one of exec, httpGet, tcpSocket, grpc or sleep")]
    NoHandler,
    #[error("more than one handler: set exactly one")]
    ManyHandlers,
    #[error("exec.command is empty")]
    EmptyCommand,
    #[error("httpGet.scheme {0:?}: use HTTP or HTTPS")]
    Scheme(String),
    #[error("httpGet.protocol {0:?} is not supported by Outpost; leave it unset (HTTP/1.1)")]
    Protocol(String),
    #[error("grpc.mode {0:?} is not supported by Outpost; leave it unset or Plaintext")]
    GrpcMode(String),
    #[error("grpc.port {0} is not a port number")]
    GrpcPort(i32),
    #[error("port {0} is not a port number (1-65535)")]
    PortNumber(i32),
    #[error("port {name:?} is not the name of one of container {container}'s ports")]
    PortName { name: String, container: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The three probes of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// As kubelet names it in events and in `prober_probe_total`'s `probe_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }

    /// The container's probe of this kind.
    pub fn of(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeKind::Startup => container.startup_probe.as_ref(),
            ProbeKind::Liveness => container.liveness_probe.as_ref(),
            ProbeKind::Readiness => container.readiness_probe.as_ref(),
        }
    }

    pub const ALL: [ProbeKind; 3] = [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness];
}

/// The two lifecycle hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    PostStart,
    PreStop,
}

impl Hook {
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::PostStart => "PostStart",
            Hook::PreStop => "PreStop",
        }
    }

    /// The container's handler for this hook.
    pub fn of(self, container: &Container) -> Option<&LifecycleHandler> {
        let lifecycle = container.lifecycle.as_ref()?;
        match self {
            Hook::PostStart => lifecycle.post_start.as_ref(),
            Hook::PreStop => lifecycle.pre_stop.as_ref(),
        }
    }
}

/// `http` or `https` (with no certificate check, as kubelet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// An `httpGet` action, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Starts with `/`; may carry a query.
    pub path: String,
    /// Extra headers; a `Host` header here is the request's host.
    pub headers: Vec<(String, String)>,
}

impl HttpGet {
    /// The URL the request goes to (IPv6 hosts bracketed).
    pub fn url(&self) -> String {
        let host = match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => self.host.clone(),
        };
        format!("{}://{host}:{}{}", self.scheme.as_str(), self.port, self.path)
    }
}

/// What a probe or hook runs, resolved against its container and pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// A command in the container (exit 0: success).
    Exec { command: Vec<String> },
    /// 2xx and 3xx: success.
    HttpGet(HttpGet),
    /// A connection: success.
    TcpSocket { host: String, port: u16 },
    /// `grpc.health.v1.Health/Check` (SERVING: success); `service` may be empty.
    Grpc { host: String, port: u16, service: String },
    /// A hook that waits (`sleep`).
    Sleep(Duration),
}

impl Handler {
    /// How kubelet's describe names it: `exec [cat /tmp/healthy]`,
    /// `http-get http://:8080/healthz`, `tcp-socket :8080`, `grpc <pod>:2379 liveness`.
    pub fn describe(&self) -> String {
        match self {
            Handler::Exec { command } => format!("exec [{}]", command.join(" ")),
            Handler::HttpGet(get) => format!("http-get {}", get.url()),
            Handler::TcpSocket { host, port } => format!("tcp-socket {host}:{port}"),
            Handler::Grpc { host, port, service } => format!("grpc {host}:{port} {service}"),
            Handler::Sleep(d) => format!("sleep {}s", d.as_secs()),
        }
    }
}

/// A probe or hook run's result, as kubelet's prober has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Counted as a success; kubelet records a `ProbeWarning` event (an HTTP redirect
    /// to another host, say).
    Warning(String),
    /// What went wrong, as kubelet's event message says it
    /// (`HTTP probe failed with statuscode: 500`).
    Failure(String),
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        !matches!(self, Outcome::Failure(_))
    }

    /// `prober_probe_total`'s `result` label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Outcome::Success | Outcome::Warning(_) => "successful",
            Outcome::Failure(_) => "failed",
        }
    }
}

/// Where the probes of a pod go by default: the pod's IP (the node's for a hostNetwork
/// pod, which has no other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub pod_ip: Option<IpAddr>,
    pub host_ip: Option<IpAddr>,
}

impl Target {
    fn default_host(self) -> String {
        self.pod_ip
            .or(self.host_ip)
            .map_or_else(|| std::net::Ipv4Addr::LOCALHOST.to_string(), |ip| ip.to_string())
    }
}

/// A probe's settings, with the API's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    pub handler: Handler,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe's own `terminationGracePeriodSeconds` (liveness and startup).
    pub grace: Option<Duration>,
}

impl ProbeSpec {
    /// The probe of `kind` of `container`, resolved; `None` if it has none. An error says
    /// what in it cannot be run (a port name the container does not declare, say).
    pub fn of(kind: ProbeKind, container: &Container, target: Target) -> Option<Result<ProbeSpec>> {
        let probe = kind.of(container)?;
        Some(probe_spec(kind, probe, container, target))
    }
}

fn probe_spec(
    kind: ProbeKind,
    probe: &Probe,
    container: &Container,
    target: Target,
) -> Result<ProbeSpec> {
    let handler = probe_handler(probe, container, target)?;
    let seconds = |v: Option<i32>, default: u64, min: u64| {
        Duration::from_secs(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(default).max(min))
    };
    let count = |v: Option<i32>, default: u32| {
        v.and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0).unwrap_or(default)
    };
    let success_threshold = match kind {
        // The API server insists on 1 for these.
        ProbeKind::Liveness | ProbeKind::Startup => 1,
        ProbeKind::Readiness => count(probe.success_threshold, 1),
    };
    let grace = match kind {
        ProbeKind::Readiness => None,
        _ => probe
            .termination_grace_period_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
    };
    Ok(ProbeSpec {
        kind,
        handler,
        initial_delay: seconds(probe.initial_delay_seconds, 0, 0),
        period: seconds(probe.period_seconds, 10, 1),
        timeout: seconds(probe.timeout_seconds, 1, 1),
        success_threshold,
        failure_threshold: count(probe.failure_threshold, 3),
        grace,
    })
}

/// The one handler a probe has.
pub fn probe_handler(probe: &Probe, container: &Container, target: Target) -> Result<Handler> {
    let handlers = [
        probe.exec.as_ref().map(exec),
        probe.http_get.as_ref().map(|h| http_get(h, container, target)),
        probe.tcp_socket.as_ref().map(|t| tcp_socket(t, container, target)),
        probe.grpc.as_ref().map(|g| grpc(g, target)),
    ];
    one(handlers)
}

/// The one handler a lifecycle hook has.
pub fn hook_handler(
    hook: &LifecycleHandler,
    container: &Container,
    target: Target,
) -> Result<Handler> {
    let handlers = [
        hook.exec.as_ref().map(exec),
        hook.http_get.as_ref().map(|h| http_get(h, container, target)),
        // The API keeps tcpSocket hooks for compatibility; kubelet runs none ("invalid
        // handler"), and neither does Outpost.
        hook.tcp_socket.as_ref().map(|_| Err(Error::TcpSocketHook)),
        hook.sleep.as_ref().map(|s| {
            u64::try_from(s.seconds)
                .map(|s| Handler::Sleep(Duration::from_secs(s)))
                .map_err(|_| Error::NegativeSleep(s.seconds))
        }),
    ];
    one(handlers)
}

fn one<const N: usize>(handlers: [Option<Result<Handler>>; N]) -> Result<Handler> {
    let mut set = handlers.into_iter().flatten();
    match (set.next(), set.next()) {
        (Some(handler), None) => handler,
        (None, _) => Err(Error::NoHandler),
        (Some(_), Some(_)) => Err(Error::ManyHandlers),
    }
}

fn exec(action: &ExecAction) -> Result<Handler> {
    let command = action.command.clone().unwrap_or_default();
    if command.is_empty() {
        return Err(Error::EmptyCommand);
    }
    Ok(Handler::Exec { command })
}

fn http_get(action: &HTTPGetAction, container: &Container, target: Target) -> Result<Handler> {
    let scheme = match action.scheme.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("HTTP") => Scheme::Http,
        Some("HTTPS") => Scheme::Https,
        Some(other) => return Err(Error::Scheme(other.to_owned())),
    };
    if let Some(protocol) = action.protocol.as_deref().filter(|p| *p != "HTTP/1.1") {
        return Err(Error::Protocol(protocol.to_owned()));
    }
    let port = port(&action.port, container)?;
    let path = match action.path.as_deref() {
        None | Some("") => "/".to_owned(),
        Some(p) if p.starts_with('/') => p.to_owned(),
        Some(p) => format!("/{p}"),
    };
    let headers =
        action.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect();
    let host = host(action.host.as_deref(), target);
    Ok(Handler::HttpGet(HttpGet { scheme, host, port, path, headers }))
}

fn tcp_socket(action: &TCPSocketAction, container: &Container, target: Target) -> Result<Handler> {
    Ok(Handler::TcpSocket {
        host: host(action.host.as_deref(), target),
        port: port(&action.port, container)?,
    })
}

fn grpc(action: &GRPCAction, target: Target) -> Result<Handler> {
    if let Some(mode) = action.mode.as_deref().filter(|m| *m != "Plaintext") {
        return Err(Error::GrpcMode(mode.to_owned()));
    }
    let port =
        u16::try_from(action.port).ok().filter(|p| *p > 0).ok_or(Error::GrpcPort(action.port))?;
    Ok(Handler::Grpc {
        host: target.default_host(),
        port,
        service: action.service.clone().unwrap_or_default(),
    })
}

fn host(host: Option<&str>, target: Target) -> String {
    match host {
        Some(h) if !h.is_empty() => h.to_owned(),
        _ => target.default_host(),
    }
}

/// A port number, or the name of one of the container's ports.
fn port(port: &IntOrString, container: &Container) -> Result<u16> {
    match port {
        IntOrString::Int(n) => {
            u16::try_from(*n).ok().filter(|p| *p > 0).ok_or(Error::PortNumber(*n))
        }
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<i32>() {
                return self::port(&IntOrString::Int(n), container);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| Error::PortName {
                    name: name.clone(),
                    container: container.name.clone(),
                })
        }
    }
}

/// What in `container`'s probes and hooks cannot be run, by field path under `at`
/// (`spec.containers[0]`): for validation, so that a pod is refused rather than run with
/// a probe ignored (A1).
pub fn check(at: &str, container: &Container) -> Vec<(String, String)> {
    let target = Target { pod_ip: None, host_ip: None };
    let mut problems = Vec::new();
    for (kind, field) in [
        (ProbeKind::Startup, "startupProbe"),
        (ProbeKind::Liveness, "livenessProbe"),
        (ProbeKind::Readiness, "readinessProbe"),
    ] {
        let Some(probe) = kind.of(container) else { continue };
        if let Err(e) = probe_handler(probe, container, target) {
            problems.push((format!("{at}.{field}"), e.to_string()));
        }
        if kind != ProbeKind::Readiness && probe.success_threshold.is_some_and(|t| t != 1) {
            problems.push((
                format!("{at}.{field}.successThreshold"),
                "must be 1 for liveness and startup probes".to_owned(),
            ));
        }
        for (name, value) in [
            ("periodSeconds", probe.period_seconds),
            ("timeoutSeconds", probe.timeout_seconds),
            ("successThreshold", probe.success_threshold),
            ("failureThreshold", probe.failure_threshold),
        ] {
            if value.is_some_and(|v| v < 1) {
                problems.push((format!("{at}.{field}.{name}"), "must be at least 1".to_owned()));
            }
        }
        if probe.initial_delay_seconds.is_some_and(|v| v < 0) {
            problems.push((
                format!("{at}.{field}.initialDelaySeconds"),
                "must not be negative".to_owned(),
            ));
        }
    }
    if let Some(lifecycle) = &container.lifecycle {
        for (hook, field) in [(Hook::PostStart, "postStart"), (Hook::PreStop, "preStop")] {
            let Some(handler) = hook.of(container) else { continue };
            if let Err(e) = hook_handler(handler, container, target) {
                problems.push((format!("{at}.lifecycle.{field}"), e.to_string()));
            }
        }
        if let Some(signal) = &lifecycle.stop_signal {
            problems.push((
                format!("{at}.lifecycle.stopSignal"),
                format!(
                    "{signal:?}: Outpost stops containers with SIGTERM only; remove stopSignal"
                ),
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests;
