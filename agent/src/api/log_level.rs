//! `/debug/log-level`: `GET` answers the agent's log filter (EnvFilter syntax) as text;
//! `PUT` with a filter as the body (`debug`, `outpost=debug,info`) replaces it at run
//! time: 200 with the new filter, 400 with the parse error. Each change is logged at
//! info with who made it.

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::{Authorized, Peer};
use super::{AppState, Problem};

/// A filter is a line of directives; anything longer is not one.
const MAX_FILTER_BYTES: usize = 4096;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route(
        "/debug/log-level",
        get(current).put(replace).layer(DefaultBodyLimit::max(MAX_FILTER_BYTES)),
    )
}

async fn current(State(state): State<AppState>) -> Response {
    match state.log_level.current() {
        Ok(filter) => format!("{filter}\n").into_response(),
        Err(e) => Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn replace(
    Authorized(by): Authorized,
    peer: Option<Extension<Peer>>,
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<String, Problem> {
    let body = body.map_err(|rejection| {
        Problem::new(
            rejection.status(),
            format!(
                "cannot read the log filter ({}); send a filter such as `debug` of at most {MAX_FILTER_BYTES} bytes",
                rejection.body_text()
            ),
        )
    })?;
    let spec = std::str::from_utf8(&body).map_err(|_| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "the log filter is not UTF-8 text; send a filter such as `debug`",
        )
    })?;
    let filter = state.log_level.set(spec).map_err(|e| match e {
        crate::logging::Error::Parse { .. } => Problem::new(StatusCode::BAD_REQUEST, e.to_string()),
        crate::logging::Error::Reload(_) => {
            Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    })?;
    tracing::info!(
        %filter, by = ?by, remote = ?peer.map(|Extension(p)| p.remote),
        "log filter changed through the local API"
    );
    Ok(format!("{filter}\n"))
}
