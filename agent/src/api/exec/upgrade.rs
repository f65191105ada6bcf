//! Which transport a streaming request asks for, and the permit each session holds.
//!
//! A request with `Upgrade: SPDY/3.1` goes to [`spdy`]; a WebSocket upgrade to this
//! agent's WebSocket sessions (`session`, `port_forward`); anything else is a 400 that
//! says what to send. Every session, over either transport, holds a [`Permit`] until
//! its process is waited for or dropped (exec, attach) or its dialer is dropped
//! (port-forward): one of [`MAX_SESSIONS`](super::MAX_SESSIONS) for the node, and one of
//! [`SESSIONS_PER_USER`] for the authenticated user it is for, so that one caller
//! cannot take every session.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::OwnedSemaphorePermit;

use super::{MAX_SESSIONS, Refusal};
use crate::api::AppState;
use crate::api::container_logs::status;
use crate::api::spdy;
use crate::api::streams::{Ended, Endpoint, Error, PortDialer, Process, SESSIONS_PER_USER};

/// The transport a request asks for.
pub(super) enum Transport {
    /// SPDY/3.1, or SPDY tunnelled in a WebSocket: the whole request, for
    /// [`spdy::upgrade`].
    Spdy(Request),
    WebSocket(WebSocketUpgrade),
}

/// The transport `request` asks for, or the answer to a request that is neither.
pub(super) async fn transport(
    state: &AppState,
    request: Request,
    served: &[&str],
) -> Result<Transport, Response> {
    // KEP-4006: SPDY tunnelled in a WebSocket (port-forward's
    // `SPDY/3.1+portforward.k8s.io` subprotocol) is the `spdy` module's too.
    if spdy::is_spdy(&request) || spdy::is_tunneled_spdy(&request) {
        return Ok(Transport::Spdy(request));
    }
    let (mut parts, _body) = request.into_parts();
    match WebSocketUpgrade::from_request_parts(&mut parts, state).await {
        Ok(upgrade) => Ok(Transport::WebSocket(upgrade)),
        Err(rejection) => Err(not_an_upgrade(&parts.headers, &rejection, served)),
    }
}

/// The streaming sessions each user holds.
#[derive(Debug, Default, Clone)]
pub struct Users(Arc<Mutex<HashMap<String, usize>>>);

/// One session's share of the node's and of its user's sessions, given back on drop.
#[derive(Debug)]
pub(super) struct Permit {
    _node: OwnedSemaphorePermit,
    user: String,
    users: Users,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut users = self.users.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(held) = users.get_mut(&self.user) {
            *held -= 1;
            if *held == 0 {
                users.remove(&self.user);
            }
        }
    }
}

/// A permit for one more session of `user` (`None`: the loopback's anonymous caller),
/// or the 429 that says which limit it is past.
pub(super) fn permit(state: &AppState, user: Option<&str>) -> Result<Permit, Refusal> {
    let user = user.unwrap_or_default().to_owned();
    let node = state.exec_sessions.clone().try_acquire_owned().map_err(|_| {
        Refusal::TooMany(format!(
            "{MAX_SESSIONS} stream sessions (exec, attach, port-forward) are open, the most this agent serves at once; end one and retry"
        ))
    })?;
    let users = state.stream_users.clone();
    {
        let mut held = users.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = held.entry(user.clone()).or_default();
        if *count >= SESSIONS_PER_USER {
            return Err(Refusal::TooMany(format!(
                "user {user:?} holds {SESSIONS_PER_USER} stream sessions (exec, attach, port-forward), the most one user may hold at once; end one and retry"
            )));
        }
        *count += 1;
    }
    Ok(Permit { _node: node, user, users })
}

/// `endpoint`, holding `permit` for as long as its session lasts.
pub(super) fn hold(endpoint: Endpoint, permit: Permit) -> Endpoint {
    match endpoint {
        Endpoint::Command { options, command, start } => {
            let start = Box::new(move || {
                async move {
                    let mut attached = start().await?;
                    attached.process = Box::new(Held { process: attached.process, permit });
                    Ok(attached)
                }
                .boxed()
            });
            Endpoint::Command { options, command, start }
        }
        Endpoint::PortForward { dialer, ports } => Endpoint::PortForward {
            dialer: Arc::new(HeldDialer { dialer, _permit: permit }),
            ports,
        },
    }
}

/// A process holding a session's permit.
struct Held {
    process: Box<dyn Process>,
    permit: Permit,
}

impl Process for Held {
    fn resize(&self, width: u16, height: u16) -> BoxFuture<'_, Result<(), Error>> {
        self.process.resize(width, height)
    }

    fn wait(self: Box<Self>) -> BoxFuture<'static, Ended> {
        let Held { process, permit } = *self;
        async move {
            let ended = process.wait().await;
            drop(permit);
            ended
        }
        .boxed()
    }
}

/// A dialer holding a session's permit.
struct HeldDialer {
    dialer: Arc<dyn PortDialer>,
    _permit: Permit,
}

impl PortDialer for HeldDialer {
    fn pod(&self) -> String {
        self.dialer.pod()
    }

    fn dial(&self, port: u16) -> BoxFuture<'static, io::Result<tokio::net::TcpStream>> {
        self.dialer.dial(port)
    }
}

/// The answer to a request that is neither a SPDY nor a WebSocket upgrade.
fn not_an_upgrade(
    headers: &HeaderMap,
    rejection: &WebSocketUpgradeRejection,
    served: &[&str],
) -> Response {
    let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let message = format!(
        "this endpoint streams over SPDY/3.1 (Upgrade: SPDY/3.1) or a WebSocket (Upgrade: websocket, Sec-WebSocket-Protocol: {}); {} ({})",
        served.join(" or "),
        if upgrade.is_empty() {
            "this request asks for no upgrade".to_owned()
        } else {
            format!("this one asks for {upgrade:?}")
        },
        rejection.body_text()
    );
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

/// The subprotocol of `served` that `upgrade` settles on, or the 400 saying none of the
/// asked-for ones is served (`None`: the client asked for none, which `empty_ok` allows).
pub(super) fn protocol(
    upgrade: &WebSocketUpgrade,
    served: &[&str],
    empty_ok: bool,
) -> Result<Option<String>, Refusal> {
    if let Some(selected) = upgrade.selected_protocol().and_then(|p| p.to_str().ok()) {
        return Ok(Some(selected.to_owned()));
    }
    let asked: Vec<&str> = upgrade.requested_protocols().filter_map(|p| p.to_str().ok()).collect();
    if asked.is_empty() && empty_ok {
        return Ok(None);
    }
    Err(Refusal::bad_request(format!(
        "none of the WebSocket subprotocols asked for ({}) is served: ask for {} (Sec-WebSocket-Protocol)",
        if asked.is_empty() { "none".to_owned() } else { asked.join(", ") },
        served.join(" or ")
    )))
}
