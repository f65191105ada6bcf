//! kubelet's streaming endpoints: `/exec/{namespace}/{pod}[/{uid}]/{container}` runs a
//! command in a running container over a WebSocket (GET with `Upgrade: websocket`; the
//! subprotocols `v5.channel.k8s.io`, preferred, and `v4.channel.k8s.io`), with kubelet's
//! query parameters `command` (repeated), `stdin`, `stdout`, `stderr` and `tty`; and
//! `POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...` runs one to its end and
//! answers its output. Both change state, so both need credentials ([`super::auth`]).
//!
//! SPDY/3.1, which 1.30-1.35 API servers speak to kubelets for `kubectl exec`, is served
//! by [`super::spdy`] (`Upgrade: SPDY/3.1`, kubelet's `input`/`output`/`error`/`tty`
//! parameters). A 1.36+ API server proxies
//! the client's WebSocket to a node that declares `ExtendWebSocketsToKubelet` (the Node
//! status does, [`outpost_core::node_status::DECLARED_FEATURES`]); see the book's "Exec"
//! (`docs/src/operations/exec.md`).
//! The container is found in the pod's live status; an unknown pod or container is a
//! 404 `metav1.Status`, one that is not running a 400.
//!
//! - `channel`: the `channel.k8s.io` framing and the error channel's status (both sides).
//! - `run`: the `/run` handler.
//! - `session`: one WebSocket session, from the command's start to its status.

pub mod channel;
mod run;
mod session;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use tracing::Instrument;

use self::channel::Protocol;
use super::AppState;
use super::auth::Authorized;
use super::container_logs::status;
use crate::runtime::exec::{Execs, Request};

/// Exec sessions open at once: each holds a process in a container, its FIFOs and a few
/// tasks; an operator's box needs a handful.
pub const MAX_SESSIONS: usize = 16;

/// The routes of this module.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/exec/{namespace}/{pod}/{container}", get(exec).post(exec))
        .route("/exec/{namespace}/{pod}/{uid}/{container}", get(exec_uid).post(exec_uid))
        .route("/run/{namespace}/{pod}/{container}", post(run::run))
        .route("/run/{namespace}/{pod}/{uid}/{container}", post(run::run_uid))
}

/// Which container of which pod, as the path names it.
#[derive(Debug)]
struct Named {
    namespace: String,
    pod: String,
    uid: Option<String>,
    container: String,
}

/// Why a command cannot be run, answered as a `metav1.Status`.
#[derive(Debug)]
enum Refusal {
    /// The API server's answer for a pod it does not have.
    PodNotFound(String),
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
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::PodNotFound(name) => super::pod::not_found(&name),
            Refusal::Status { code, reason, message } => status(code, reason, message),
        }
    }
}

/// A container found running.
#[derive(Debug)]
struct Found {
    uid: String,
    /// The containerd container ID.
    id: String,
}

async fn exec(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    query: RawQuery,
    request: axum::extract::Request,
) -> Response {
    let named = Named { namespace, pod, uid: None, container };
    dispatch(state, auth, named, query, request).await
}

async fn exec_uid(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, uid, container)): Path<(String, String, String, String)>,
    query: RawQuery,
    request: axum::extract::Request,
) -> Response {
    let named = Named { namespace, pod, uid: Some(uid), container };
    dispatch(state, auth, named, query, request).await
}

/// SPDY/3.1 (`Upgrade: SPDY/3.1`) to [`super::spdy`], a WebSocket to [`start`].
async fn dispatch(
    state: State<AppState>,
    auth: Authorized,
    named: Named,
    query: RawQuery,
    request: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest as _;
    if super::spdy::is_spdy(&request) {
        return start_spdy(state, auth, named, query, request);
    }
    let headers = request.headers().clone();
    let upgrade = WebSocketUpgrade::from_request(request, &state).await;
    start(state, auth, named, query, headers, upgrade)
}

/// `/exec` over SPDY/3.1: kubelet's `input`/`output`/`error`/`tty` parameters
/// ([`super::streams::StreamOptions`]), the command started once the client's streams
/// are open.
fn start_spdy(
    State(state): State<AppState>,
    Authorized(by): Authorized,
    named: Named,
    RawQuery(query): RawQuery,
    request: axum::extract::Request,
) -> Response {
    let (options, command) = match super::streams::StreamOptions::parse(query.as_deref()) {
        Ok(parsed) => parsed,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", message),
    };
    if command.is_empty() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "give the command to run: one command=... query parameter per argument".to_owned(),
        );
    }
    let execs = match available(&state) {
        Ok(execs) => execs.clone(),
        Err(refusal) => return refusal.into_response(),
    };
    let found = match locate(&state, &named) {
        Ok(found) => found,
        Err(refusal) => return refusal.into_response(),
    };
    let Ok(permit) = state.exec_sessions.clone().try_acquire_owned() else {
        return status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            format!(
                "{MAX_SESSIONS} exec sessions are open, the most this agent serves at once; end one and retry"
            ),
        );
    };
    let span = tracing::info_span!(
        "exec",
        pod.namespace = %named.namespace, pod.name = %named.pod, pod.uid = %found.uid,
        container = %named.container, protocol = "SPDY/3.1",
    );
    span.in_scope(|| tracing::debug!(?command, by = ?by, "exec requested"));
    let runtime_request = Request {
        command,
        stdin: options.stdin,
        stdout: options.stdout,
        stderr: options.stderr,
        tty: options.tty,
    };
    let start = super::spdy::exec_start(execs, found.id, runtime_request, permit);
    let endpoint = super::streams::Endpoint::Command { options, start };
    span.in_scope(|| super::spdy::upgrade(request, endpoint))
}

/// Checks the request, finds the container and upgrades the connection; the session
/// runs on the upgraded connection's own task.
fn start(
    State(state): State<AppState>,
    Authorized(by): Authorized,
    named: Named,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let request = match parse(query.as_deref()) {
        Ok(request) => request,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", message),
    };
    let execs = match available(&state) {
        Ok(execs) => execs.clone(),
        Err(refusal) => return refusal.into_response(),
    };
    let found = match locate(&state, &named) {
        Ok(found) => found,
        Err(refusal) => return refusal.into_response(),
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade.protocols(channel::PROTOCOLS),
        Err(rejection) => return not_websocket(&headers, &rejection),
    };
    let Some(protocol) =
        upgrade.selected_protocol().and_then(|p| p.to_str().ok()).and_then(Protocol::from_name)
    else {
        let asked: Vec<&str> =
            upgrade.requested_protocols().filter_map(|p| p.to_str().ok()).collect();
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "none of the WebSocket subprotocols asked for ({}) is served: ask for {} (Sec-WebSocket-Protocol)",
                if asked.is_empty() { "none".to_owned() } else { asked.join(", ") },
                channel::PROTOCOLS.join(" or ")
            ),
        );
    };
    let Ok(permit) = state.exec_sessions.clone().try_acquire_owned() else {
        return status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            format!(
                "{MAX_SESSIONS} exec sessions are open, the most this agent serves at once; end one and retry"
            ),
        );
    };
    let span = tracing::info_span!(
        "exec",
        pod.namespace = %named.namespace, pod.name = %named.pod, pod.uid = %found.uid,
        container = %named.container, protocol = protocol.name(),
    );
    span.in_scope(|| tracing::debug!(command = ?request.command, by = ?by, "exec requested"));
    let target = session::Target { execs, container_id: found.id, request, protocol };
    upgrade.on_upgrade(move |socket| {
        async move {
            let _permit = permit;
            session::serve(socket, target).await;
        }
        .instrument(span)
    })
}

/// The request of kubelet's query parameters. A TTY merges stderr into stdout (as
/// kubelet does); at least one stream must be asked for.
pub fn parse(query: Option<&str>) -> Result<Request, String> {
    let mut request =
        Request { command: Vec::new(), stdin: false, stdout: false, stderr: false, tty: false };
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match &*key {
            "command" => request.command.push(value.into_owned()),
            "stdin" => request.stdin = flag(&key, &value)?,
            "stdout" => request.stdout = flag(&key, &value)?,
            "stderr" => request.stderr = flag(&key, &value)?,
            "tty" => request.tty = flag(&key, &value)?,
            // `container` (the API server's), `input`/`output` (old clients'): not used.
            _ => {}
        }
    }
    if request.command.is_empty() {
        return Err("give the command to run: one command=... query parameter per argument, e.g. ?command=ls&command=-l".into());
    }
    if request.tty {
        request.stderr = false;
    }
    if !(request.stdin || request.stdout || request.stderr) {
        return Err("you must specify at least 1 of stdin, stdout, stderr (e.g. stdout=1)".into());
    }
    Ok(request)
}

/// A stream flag: kubelet's `1`, and `true` as clients of the API server send it.
fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{key} {value:?}: expected 1 (or true) or 0 (or false)")),
    }
}

/// The runtime's exec side, or why there is none.
fn available(state: &AppState) -> Result<&Execs, Refusal> {
    let runtime = super::runtime::unavailable(state.runtime_slot.as_ref())
        .map_err(|(code, reason, message)| Refusal::new(code, reason, message))?;
    Ok(&runtime.execs)
}

/// The running container the path names.
fn locate(state: &AppState, named: &Named) -> Result<Found, Refusal> {
    let shown = format!("{}/{}", named.namespace, named.pod);
    let pod = super::pod::find(state, &named.namespace, &named.pod)
        .filter(|pod| named.uid.as_deref().is_none_or(|uid| outpost_core::pod::uid(pod) == uid))
        .ok_or_else(|| Refusal::PodNotFound(named.pod.clone()))?;
    let uid = outpost_core::pod::uid(&pod).to_owned();
    let names = container_names(&pod);
    if !names.contains(&named.container) {
        return Err(Refusal::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "container {:?} not found in pod {shown}; its containers: {}",
                named.container,
                names.join(", ")
            ),
        ));
    }
    let live = container_status(&pod, &named.container);
    let running = live.filter(|s| s.state.as_ref().is_some_and(|s| s.running.is_some()));
    match running.and_then(|s| s.container_id.as_deref()).map(container_id) {
        Some(id) if !id.is_empty() => Ok(Found { uid, id: id.to_owned() }),
        _ => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "container {:?} in pod {shown} is not running ({}); a command runs only in a running container",
                named.container,
                describe_state(live)
            ),
        )),
    }
}

/// Every container name of the pod, init and ephemeral ones included.
fn container_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    let init = spec.init_containers.iter().flatten().map(|c| &c.name);
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| &c.name);
    spec.containers.iter().map(|c| &c.name).chain(init).chain(ephemeral).cloned().collect()
}

fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    [
        &status.container_statuses,
        &status.init_container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|s| s.name == name)
}

/// `<runtime>://<id>` → `<id>`.
fn container_id(full: &str) -> &str {
    full.split_once("://").map_or(full, |(_, id)| id)
}

/// A container's state in a few words: `waiting: ContainerCreating`, `terminated: Completed`.
fn describe_state(status: Option<&ContainerStatus>) -> String {
    let Some(state) = status.and_then(|s| s.state.as_ref()) else {
        return "it has not been created yet".to_owned();
    };
    let reason = |r: Option<&String>| r.map(|r| format!(": {r}")).unwrap_or_default();
    if let Some(waiting) = &state.waiting {
        format!("waiting{}", reason(waiting.reason.as_ref()))
    } else if let Some(terminated) = &state.terminated {
        format!(
            "terminated{}, exit code {}",
            reason(terminated.reason.as_ref()),
            terminated.exit_code
        )
    } else if state.running.is_some() {
        "running, but without a container ID yet".to_owned()
    } else {
        "its state is not known yet".to_owned()
    }
}

/// The answer to a request that is not a WebSocket upgrade (SPDY's in particular).
fn not_websocket(headers: &HeaderMap, rejection: &WebSocketUpgradeRejection) -> Response {
    let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let message = if upgrade.to_ascii_lowercase().starts_with("spdy") {
        format!(
            "this agent streams exec over WebSocket ({}), not {upgrade}: use outpost exec, or a WebSocket client",
            channel::PROTOCOLS.join(", ")
        )
    } else {
        format!(
            "exec streams over a WebSocket: send a GET with Connection: Upgrade, Upgrade: websocket and Sec-WebSocket-Protocol: {} ({})",
            channel::PROTOCOLS[0],
            rejection.body_text()
        )
    };
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

#[cfg(test)]
mod tests;
