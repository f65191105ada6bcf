//! kubelet's streaming endpoints (N3): `/exec/{namespace}/{pod}[/{uid}]/{container}` runs
//! a command in a running container, `/attach/{namespace}/{pod}[/{uid}]/{container}`
//! attaches to a container's own process, and `/portForward/{namespace}/{pod}[/{uid}]`
//! connects to ports in the pod's network namespace; each takes GET or POST, upgraded to
//! SPDY/3.1 ([`super::spdy`]) or to a WebSocket (`session`, `port_forward`). The stream
//! flags are kubelet's query parameters `input`, `output`, `error` and `tty`
//! ([`StreamOptions::parse`]), and `command` once per argument. Also
//! `POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...`, which runs a command to its
//! end and answers its output. All of them change state, so all need credentials
//! ([`super::auth`]).
//!
//! A 1.30-1.35 API server speaks SPDY/3.1 to the node (served by [`super::spdy`]); a
//! 1.36+ one proxies the client's
//! WebSocket to a node that declares `ExtendWebSocketsToKubelet` (the Node status does,
//! [`outpost_core::node_status::DECLARED_FEATURES`]); see the book's "Exec"
//! (`docs/src/operations/exec.md`). The pod and container are found in the pod's live
//! status; an unknown pod or container is a 404 `metav1.Status`, one that is not running
//! a 400.
//!
//! - `attach`: what `/attach` attaches to.
//! - `channel`: the `channel.k8s.io` framing and the error channel's status (both sides).
//! - `locate`: the pod and container a path names.
//! - `port_forward`: `/portForward` over a WebSocket, and the pod's [`PortDialer`].
//! - `process`: an exec's command as the transports take it ([`Attached`]).
//! - `run`: the `/run` handler.
//! - `session`: one WebSocket exec or attach session, from the start to its status.
//! - `upgrade`: which transport a request asks for, and the permit each session holds.
//! - `websocket`: an upgraded socket as logical streams (the channels).

mod attach;
pub mod channel;
mod locate;
mod port_forward;
mod process;
mod run;
mod session;
mod upgrade;
mod websocket;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use self::locate::{locate, locate_pod};
use self::upgrade::Transport;
pub use self::upgrade::Users;
use super::AppState;
use super::auth::Authorized;
use super::container_logs::status;
use super::streams::{Endpoint, StreamOptions};
use crate::runtime::exec::Execs;

/// Stream sessions (exec, attach, port-forward, over either transport) open at once:
/// each holds a process in a container or connections into a pod, and a few tasks; an
/// operator's box needs a handful. One user holds at most
/// [`SESSIONS_PER_USER`](super::streams::SESSIONS_PER_USER) of them.
pub const MAX_SESSIONS: usize = 64;

/// The routes of this module.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/exec/{namespace}/{pod}/{container}", get(exec).post(exec))
        .route("/exec/{namespace}/{pod}/{uid}/{container}", get(exec_uid).post(exec_uid))
        .route("/attach/{namespace}/{pod}/{container}", get(attach).post(attach))
        .route("/attach/{namespace}/{pod}/{uid}/{container}", get(attach_uid).post(attach_uid))
        .route("/portForward/{namespace}/{pod}", get(port_forward).post(port_forward))
        .route("/portForward/{namespace}/{pod}/{uid}", get(port_forward_uid).post(port_forward_uid))
        .route("/run/{namespace}/{pod}/{container}", post(run::run))
        .route("/run/{namespace}/{pod}/{uid}/{container}", post(run::run_uid))
}

/// Which container of which pod, as the path names it (no container for port-forward).
#[derive(Debug)]
struct Named {
    namespace: String,
    pod: String,
    uid: Option<String>,
    container: String,
}

/// Why a request cannot be served, answered as a `metav1.Status`.
#[derive(Debug)]
enum Refusal {
    /// The API server's answer for a pod it does not have.
    PodNotFound(String),
    /// A session past a limit (429). Its connection is closed after the answer, so that
    /// a client that keeps asking holds none of the node's connections (their cap would
    /// otherwise lock out every other caller, `/healthz` included).
    TooMany(String),
    Status {
        code: StatusCode,
        reason: &'static str,
        message: String,
    },
}

impl Refusal {
    fn new(code: StatusCode, reason: &'static str, message: String) -> Refusal {
        Refusal::Status { code, reason, message }
    }

    fn bad_request(message: String) -> Refusal {
        Refusal::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::PodNotFound(name) => super::pod::not_found(&name),
            Refusal::TooMany(message) => {
                let mut response =
                    status(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message);
                let close = axum::http::HeaderValue::from_static("close");
                response.headers_mut().insert(axum::http::header::CONNECTION, close);
                response
            }
            Refusal::Status { code, reason, message } => status(code, reason, message),
        }
    }
}

/// Which streaming endpoint a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Exec,
    Attach,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Exec => "exec",
            Verb::Attach => "attach",
        }
    }
}

async fn exec(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: None, container };
    command(state, auth, Verb::Exec, named, request).await
}

async fn exec_uid(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, uid, container)): Path<(String, String, String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: Some(uid), container };
    command(state, auth, Verb::Exec, named, request).await
}

async fn attach(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: None, container };
    command(state, auth, Verb::Attach, named, request).await
}

async fn attach_uid(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, uid, container)): Path<(String, String, String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: Some(uid), container };
    command(state, auth, Verb::Attach, named, request).await
}

async fn port_forward(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod)): Path<(String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: None, container: String::new() };
    forward(state, auth, named, request).await
}

async fn port_forward_uid(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, uid)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let named = Named { namespace, pod, uid: Some(uid), container: String::new() };
    forward(state, auth, named, request).await
}

/// `/exec` and `/attach`: checks the request, finds the container, and hands the
/// upgrade to the transport the client asked for.
async fn command(
    State(state): State<AppState>,
    Authorized(by): Authorized,
    verb: Verb,
    named: Named,
    request: Request,
) -> Response {
    let user = caller_name(&request);
    let (options, command) = match StreamOptions::parse(request.uri().query()) {
        Ok(parsed) => parsed,
        Err(e) => return Refusal::bad_request(e.to_string()).into_response(),
    };
    if verb == Verb::Exec && command.is_empty() {
        return Refusal::bad_request(
            "give the command to run: one command=... query parameter per argument, e.g. ?command=ls&command=-l".into(),
        )
        .into_response();
    }
    let execs = match available(&state) {
        Ok(execs) => execs.clone(),
        Err(refusal) => return refusal.into_response(),
    };
    let found = match locate(&state, &named) {
        Ok(found) => found,
        Err(refusal) => return refusal.into_response(),
    };
    let span = tracing::info_span!(
        "stream",
        verb = verb.name(),
        pod.namespace = %named.namespace, pod.name = %named.pod, pod.uid = %found.uid,
        container = %named.container, protocol = tracing::field::Empty,
    );
    span.in_scope(|| tracing::debug!(?command, ?options, by = ?by, "stream requested"));
    let start = match verb {
        Verb::Exec => process::start(execs, found.id, command.clone(), options),
        Verb::Attach => match attach::start(&state, &named, &found, options) {
            Ok(start) => start,
            Err(refusal) => return refusal.into_response(),
        },
    };
    let permit = match upgrade::permit(&state, user.as_deref()) {
        Ok(permit) => permit,
        Err(refusal) => return refusal.into_response(),
    };
    let endpoint = upgrade::hold(Endpoint::Command { options, command, start }, permit);
    match upgrade::transport(&state, request, &channel::PROTOCOLS).await {
        Ok(Transport::Spdy(request)) => {
            span.in_scope(|| super::spdy::upgrade(request, endpoint, state.streaming))
        }
        Ok(Transport::WebSocket(upgrade)) => {
            session::upgrade(upgrade, endpoint, state.streaming, span)
        }
        Err(response) => response,
    }
}

/// `/portForward`: finds the pod and hands the upgrade to the transport the client
/// asked for.
async fn forward(
    State(state): State<AppState>,
    Authorized(by): Authorized,
    named: Named,
    request: Request,
) -> Response {
    // Over a WebSocket the ports come from the query; over SPDY each stream names one,
    // also when the SPDY is tunnelled in a WebSocket (KEP-4006's
    // `SPDY/3.1+portforward.k8s.io`).
    let is_websocket = !super::spdy::is_spdy(&request) && !super::spdy::is_tunneled_spdy(&request);
    let user = caller_name(&request);
    let ports = match port_forward::ports(request.uri().query()) {
        Ok(ports) => ports,
        Err(e) if is_websocket => return Refusal::bad_request(e.to_string()).into_response(),
        Err(_) => Vec::new(),
    };
    let runtime = match super::runtime::unavailable(state.runtime_slot.as_ref()) {
        Ok(runtime) => runtime,
        Err((code, reason, message)) => return Refusal::new(code, reason, message).into_response(),
    };
    let pod = match locate_pod(&state, &named) {
        Ok(pod) => pod,
        Err(refusal) => return refusal.into_response(),
    };
    let span = tracing::info_span!(
        "stream",
        verb = "portforward",
        pod.namespace = %named.namespace, pod.name = %named.pod, pod.uid = %pod.uid,
    );
    span.in_scope(|| tracing::debug!(?ports, by = ?by, "stream requested"));
    let dialer = port_forward::PodNetwork::new(runtime, &named.pod, &pod);
    let permit = match upgrade::permit(&state, user.as_deref()) {
        Ok(permit) => permit,
        Err(refusal) => return refusal.into_response(),
    };
    let endpoint = Endpoint::PortForward { dialer: std::sync::Arc::new(dialer), ports };
    let endpoint = upgrade::hold(endpoint, permit);
    match upgrade::transport(&state, request, &port_forward::PROTOCOLS).await {
        Ok(Transport::Spdy(request)) => {
            span.in_scope(|| super::spdy::upgrade(request, endpoint, state.streaming))
        }
        Ok(Transport::WebSocket(upgrade)) => {
            port_forward::upgrade(upgrade, endpoint, state.streaming, span)
        }
        Err(response) => response,
    }
}

/// The name of the user a request is from (`None`: the loopback's anonymous caller).
fn caller_name(request: &Request) -> Option<String> {
    request.extensions().get::<std::sync::Arc<super::auth::User>>().map(|user| user.name.clone())
}

/// The runtime's exec side, or why there is none.
fn available(state: &AppState) -> Result<&Execs, Refusal> {
    let runtime = super::runtime::unavailable(state.runtime_slot.as_ref())
        .map_err(|(code, reason, message)| Refusal::new(code, reason, message))?;
    Ok(&runtime.execs)
}

#[cfg(test)]
mod tests;
