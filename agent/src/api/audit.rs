//! `GET /manifests/audit`: the manifest audit log ([`crate::audit`]), every change the
//! file source acted on with the process that wrote it, and every manifest whose pods
//! the admission policy refuses, oldest first (newest last, as a log reads). `?file=NAME` keeps one manifest's entries (its name or full path);
//! `?limit=N` keeps the newest N of those. The answer:
//! `{"kind": "ManifestAuditList", "capacity": 1000, "dropped": 0, "items": [...]}`.
//!
//! The path is the push source's `/manifests/{key}` with the key `audit`, which is
//! therefore reserved: other methods on it are refused (405).

use axum::Json;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::{AppState, Problem};
use crate::audit::{Entry, Filter};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/manifests/audit", get(audit).fallback(read_only))
}

#[derive(Debug, Deserialize)]
struct Params {
    file: Option<String>,
    limit: Option<usize>,
}

#[derive(Debug, Serialize)]
struct List {
    kind: &'static str,
    capacity: usize,
    /// Entries pushed out of the log (oldest first) since the agent started.
    dropped: u64,
    items: Vec<Arc<Entry>>,
}

async fn audit(
    State(state): State<AppState>,
    params: Result<Query<Params>, QueryRejection>,
) -> Result<Json<List>, Problem> {
    let Query(params) = params.map_err(|rejection| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!(
                "the query is not valid ({}): use ?file=NAME and ?limit=N (a number)",
                rejection.body_text()
            ),
        )
    })?;
    let listing = state.audit.list(&Filter { file: params.file, limit: params.limit });
    Ok(Json(List {
        kind: "ManifestAuditList",
        capacity: listing.capacity,
        dropped: listing.dropped,
        items: listing.items,
    }))
}

async fn read_only() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "/manifests/audit is the manifest audit log and can only be read (GET); \
         \"audit\" cannot be a push key, choose another",
    )
}
