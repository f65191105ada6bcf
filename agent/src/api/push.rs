//! The push source's endpoints and `POST /refresh`. Those that change state need
//! credentials ([`Authorized`]); the GETs are reads like any other (see `auth`). A
//! refused request is answered before its body is read, and changes nothing.
//!
//! - `PUT /manifests/{key}`: body a Pod or PodList, YAML or JSON, at most 10 MiB (S8).
//!   201 for a new key, 200 for a replaced or identical one. Pods the admission policy
//!   refuses are stored (they show as Failed in `/pods`), listed under `refused`, and
//!   recorded in the manifest audit.
//! - `DELETE /manifests/{key}`: 200 with what was removed; 404 for an unknown key.
//! - `GET /manifests`, `GET /manifests/{key}`: what is pushed (keys, pods, UIDs, when).
//! - `POST /refresh`: fetch the manifest URL now (202); 404 without `--manifest-url`.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Extension, Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use outpost_core::manifest::MAX_MANIFEST_BYTES;
use outpost_core::source::push::Error as Refusal;
use outpost_core::source::short_sha256;
use serde::Serialize;

use super::auth::{Authorized, Method as Credential, Peer};
use super::{AppState, Problem};
use crate::audit::admission::Manifest;
use crate::audit::{self, ManifestSource, Writer};
use crate::source::push::{self, Change, PushHandle, Summary};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/manifests", get(list).fallback(not_allowed))
        .route("/manifests/", any(no_key))
        .route(
            "/manifests/{key}",
            get(show)
                .put(put)
                .delete(delete)
                .fallback(not_allowed)
                .layer(DefaultBodyLimit::max(MAX_MANIFEST_BYTES)),
        )
        .route("/refresh", post(refresh).fallback(not_allowed))
}

/// Other methods on these paths get the same error shape as everything else here.
async fn not_allowed(method: Method, uri: Uri) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} {} is not supported; use GET /manifests, GET, PUT or DELETE /manifests/{{key}}, or POST /refresh",
            uri.path()
        ),
    )
}

async fn no_key() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "the push key is missing: use /manifests/{key}")
}

/// `PUT` answers with the stored manifest and what the PUT did.
#[derive(Debug, Serialize)]
struct Stored {
    #[serde(flatten)]
    summary: Summary,
    /// `created`, `replaced` or `unchanged`.
    change: &'static str,
    /// What the admission policy refuses of its pods, one line per field (they are
    /// stored, and Failed with reason CapabilitiesForbidden).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    refused: Vec<String>,
}

#[derive(Debug, Serialize)]
struct List {
    manifests: Vec<Summary>,
}

async fn put(
    Authorized(by): Authorized,
    peer: Option<Extension<Peer>>,
    State(state): State<AppState>,
    key: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let handle = handle(&state)?;
    let Path(key) = key.map_err(path_problem)?;
    // A body over the limit (413) or cut short (the client closed early, 400) is
    // refused here, before anything is decoded or stored.
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        let error = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!(
                "manifest {key}: the body is over the limit of {MAX_MANIFEST_BYTES} bytes (10 MiB); split it into smaller manifests; nothing changed"
            )
        } else {
            format!("manifest {key}: cannot read the body ({}); nothing changed", rejection.body_text())
        };
        Problem::new(status, error)
    })?;
    let sha256 = short_sha256(&body);
    let (summary, change) = handle.put(&key, body).await.map_err(problem)?;
    let pods = handle.pods(&key);
    let refusals = state.audit.refusals(ManifestSource::Push, pods.iter().map(|p| &**p));
    // A manifest pushed again unchanged was audited when it changed.
    if change != Change::Unchanged {
        let remote = peer.map_or_else(|| "?".to_owned(), |Extension(p)| p.remote.to_string());
        let manifest = Manifest {
            source: ManifestSource::Push,
            path: format!("/manifests/{key}"),
            file: key,
            cause: audit::Cause::Push,
            sha256: Some(sha256),
            writer: Writer::remote(&format!("PUT from {remote} with {}", credential(by))),
        };
        state.audit.refused(manifest, &refusals);
    }
    let (status, change) = match change {
        Change::Created => (StatusCode::CREATED, "created"),
        Change::Replaced => (StatusCode::OK, "replaced"),
        Change::Unchanged => (StatusCode::OK, "unchanged"),
    };
    let refused = refusals.lines;
    Ok((status, Json(Stored { summary, change, refused })).into_response())
}

async fn delete(
    _: Authorized,
    State(state): State<AppState>,
    key: Result<Path<String>, PathRejection>,
) -> Result<Json<Summary>, Problem> {
    let handle = handle(&state)?;
    let Path(key) = key.map_err(path_problem)?;
    handle.delete(&key).await.map(Json).map_err(problem)
}

async fn show(
    State(state): State<AppState>,
    key: Result<Path<String>, PathRejection>,
) -> Result<Json<Summary>, Problem> {
    let handle = handle(&state)?;
    let Path(key) = key.map_err(path_problem)?;
    push::validate_key(&key).map_err(problem)?;
    handle.summary(&key).map(Json).ok_or_else(|| problem(Refusal::NotFound { key }))
}

async fn list(State(state): State<AppState>) -> Result<Json<List>, Problem> {
    Ok(Json(List { manifests: handle(&state)?.list() }))
}

async fn refresh(_: Authorized, State(state): State<AppState>) -> Result<Response, Problem> {
    #[derive(Serialize)]
    struct Requested {
        refresh: &'static str,
    }
    let Some(refresh) = &state.refresh else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no manifest URL is configured, so there is nothing to refresh; set --manifest-url",
        ));
    };
    refresh.request();
    tracing::info!("manifest URL refresh requested through the local API");
    Ok((StatusCode::ACCEPTED, Json(Requested { refresh: "requested" })).into_response())
}

pub(super) fn credential(method: Credential) -> &'static str {
    match method {
        Credential::Token => "the bearer token",
        Credential::ClientCert => "a client certificate",
        Credential::TokenReview => "a bearer token the API server accepted",
        Credential::Anonymous => "no credentials (system:anonymous, allowed by the API server)",
    }
}

/// The push source's handle; absent only when the agent runs without it.
fn handle(state: &AppState) -> Result<&PushHandle, Problem> {
    state.push.as_ref().ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "the push source is not running: configure --token-file or --client-ca-file to enable it",
        )
    })
}

fn path_problem(rejection: PathRejection) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        format!("the push key in the path is not valid: {}", rejection.body_text()),
    )
}

/// The status for each kind of push error.
fn problem(error: impl Into<push::Error>) -> Problem {
    use push::Error as E;
    let error = error.into();
    let status = match &error {
        _ if error.is_too_large() => StatusCode::PAYLOAD_TOO_LARGE,
        E::Refused(
            Refusal::Key { .. }
            | Refusal::Empty { .. }
            | Refusal::Manifest { .. }
            | Refusal::Duplicate { .. },
        ) => StatusCode::BAD_REQUEST,
        E::Refused(Refusal::Conflict { .. }) => StatusCode::CONFLICT,
        E::Refused(Refusal::NotFound { .. }) => StatusCode::NOT_FOUND,
        E::Stopped { .. } => StatusCode::SERVICE_UNAVAILABLE,
        E::Checkpoint { .. } | E::Task { .. } | E::Restore { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    if status.is_server_error() {
        tracing::error!(error = %error, "push request failed");
    } else {
        tracing::info!(error = %error, "push request refused");
    }
    let details = error.details();
    let error = match &error {
        // The problems are listed in `details`; the message says what happened.
        E::Refused(Refusal::Manifest { key, errors }) => format!(
            "manifest {key} is rejected ({} problem{}), nothing changed: {}",
            errors.0.len(),
            if errors.0.len() == 1 { "" } else { "s" },
            details.first().map(String::as_str).unwrap_or_default()
        ),
        _ => error.to_string(),
    };
    Problem { status, error, details }
}
