//! kubelet's `POST /run/{namespace}/{pod}[/{uid}]/{container}`: runs the command of the
//! `cmd` parameter (query, or a form body) to its end and answers its output, stdout then
//! stderr as they came (the first [`MAX_OUTPUT`](crate::runtime::exec::MAX_OUTPUT) bytes).
//! As kubelet does, `cmd` is split at each space (no quoting), and a command that exits
//! non-zero is a 500 whose message holds its exit code and output.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::{Named, available, locate};
use crate::api::AppState;
use crate::api::auth::Authorized;
use crate::api::container_logs::status;
use crate::error_chain::describe;
use crate::runtime::exec;

/// How long a command may run: within the local API's whole-request timeout, so that
/// this answer, which says what happened, comes first.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn run(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    query: RawQuery,
    body: Bytes,
) -> Response {
    respond(state, auth, Named { namespace, pod, uid: None, container }, query, body).await
}

pub async fn run_uid(
    state: State<AppState>,
    auth: Authorized,
    Path((namespace, pod, uid, container)): Path<(String, String, String, String)>,
    query: RawQuery,
    body: Bytes,
) -> Response {
    respond(state, auth, Named { namespace, pod, uid: Some(uid), container }, query, body).await
}

async fn respond(
    State(state): State<AppState>,
    Authorized(by): Authorized,
    named: Named,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let Some(command) = command(query.as_deref(), &body) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "give the command in the cmd parameter, its arguments separated by spaces, e.g. ?cmd=ls%20-l".into(),
        );
    };
    let execs = match available(&state) {
        Ok(execs) => execs.clone(),
        Err(refusal) => return refusal.into_response(),
    };
    let found = match locate(&state, &named) {
        Ok(found) => found,
        Err(refusal) => return refusal.into_response(),
    };
    let span = tracing::info_span!(
        "run",
        pod.namespace = %named.namespace, pod.name = %named.pod, pod.uid = %found.uid,
        container = %named.container,
    );
    span.in_scope(|| tracing::debug!(?command, by = ?by, "run requested"));
    let result = execs.run(&found.id, &command, RUN_TIMEOUT).instrument(span.clone()).await;
    let _entered = span.enter();
    match result {
        Ok(output) if output.exit_code == 0 => {
            tracing::info!("run ended");
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], output.output).into_response()
        }
        Ok(output) => {
            tracing::info!(exit_code = output.exit_code, "run ended");
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                format!(
                    "command '{}' exited with {}: {}",
                    command.join(" "),
                    output.exit_code,
                    String::from_utf8_lossy(&output.output)
                ),
            )
        }
        Err(e @ exec::Error::TimedOut { .. }) => {
            tracing::info!(timeout = ?RUN_TIMEOUT, "run timed out");
            status(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!("command '{}': {}; it was killed", command.join(" "), describe(&e)),
            )
        }
        Err(e) => {
            tracing::warn!(error = %describe(&e), "run failed");
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                format!("cannot run command '{}': {}", command.join(" "), describe(&e)),
            )
        }
    }
}

/// The `cmd` parameter of the query, else of a form body, split at each space as kubelet
/// splits it; `None` when there is none.
pub fn command(query: Option<&str>, body: &[u8]) -> Option<Vec<String>> {
    let find = |bytes: &[u8]| {
        form_urlencoded::parse(bytes)
            .find(|(key, _)| key == "cmd")
            .map(|(_, value)| value.into_owned())
            .filter(|value| !value.is_empty())
    };
    let cmd = find(query.unwrap_or_default().as_bytes()).or_else(|| find(body))?;
    Some(cmd.split(' ').map(str::to_owned).collect())
}
