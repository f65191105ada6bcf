//! `/healthz` and `/readyz` as the API server answers them: plain, `ok` (200) when every
//! check passes, else 503 with the failing checks and `<endpoint> check failed`;
//! `?verbose` lists every check (`[+]name ok: …`, `[-]name failed: …`) and ends with
//! `<endpoint> check passed` or `failed`; `?exclude=name` (repeatable) skips a check.
//! A check's notes (a source's manifests rejected or warned about) follow its line,
//! indented; they never fail it. [`report`] is the pure part.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::podconfig::{SourceHealth, SourceState};
use crate::source::problems;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `source-<name>`, `runtime`, `ping`.
    pub name: String,
    pub passed: bool,
    /// What the check found (`live`, `containerd not connected`, ...).
    pub detail: String,
    /// Lines shown under the check's (each manifest with problems, for a source).
    pub notes: Vec<String>,
}

impl Check {
    pub fn new(name: impl Into<String>, passed: bool, detail: impl Into<String>) -> Check {
        Check { name: name.into(), passed, detail: detail.into(), notes: Vec::new() }
    }
}

/// What the query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub verbose: bool,
    pub exclude: Vec<String>,
}

impl Query {
    /// `verbose` (any value, or none) and `exclude=name` (repeatable); other keys are
    /// ignored, as the API server does.
    pub fn parse(query: Option<&str>) -> Query {
        let mut parsed = Query::default();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*key {
                "verbose" => parsed.verbose = true,
                "exclude" => parsed.exclude.push(value.into_owned()),
                _ => {}
            }
        }
        parsed
    }
}

/// The status and body for `endpoint` (`healthz`, `readyz`) given its checks.
pub fn report(endpoint: &str, checks: &[Check], query: &Query) -> (StatusCode, String) {
    let mut lines = String::new();
    let mut passed = true;
    for check in checks {
        if query.exclude.contains(&check.name) {
            if query.verbose {
                lines.push_str(&format!("[+]{} excluded: ok\n", check.name));
            }
            continue;
        }
        passed &= check.passed;
        if check.passed && query.verbose {
            lines.push_str(&format!("[+]{} ok: {}\n", check.name, check.detail));
        } else if !check.passed {
            lines.push_str(&format!("[-]{} failed: {}\n", check.name, check.detail));
        } else {
            continue;
        }
        for note in &check.notes {
            lines.push_str(&format!("    {note}\n"));
        }
    }
    let status = if passed { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    if passed && !query.verbose {
        return (status, "ok".into());
    }
    for excluded in &query.exclude {
        if !checks.iter().any(|c| &c.name == excluded) && query.verbose {
            lines.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for \"{excluded}\"\n"
            ));
        }
    }
    lines.push_str(&format!("{endpoint} check {}\n", if passed { "passed" } else { "failed" }));
    (status, lines)
}

/// The readiness checks: every configured source has delivered its first SET, live or
/// from its checkpoint (M9), with its latest failure and its manifests with problems;
/// containerd has answered.
pub fn readiness(state: &AppState) -> Vec<Check> {
    let snap = state.snapshot.load();
    let mut checks: Vec<Check> = snap.sources.iter().map(source_check).collect();
    if let Some(runtime) = &state.runtime {
        let connected = runtime.load(std::sync::atomic::Ordering::Relaxed);
        let detail = if connected { "containerd connected" } else { "containerd not connected" };
        checks.push(Check::new("runtime", connected, detail));
    }
    checks
}

/// A source's check: seen (M9) passes. A rejected manifest does not fail it (the
/// source's other pods run): it is counted on the line and listed under it.
pub fn source_check(health: &SourceHealth) -> Check {
    let (passed, text) = match health.state {
        SourceState::Live => (true, "live"),
        SourceState::Checkpoint => (true, "from checkpoint"),
        SourceState::NeverSeen => (false, "never seen"),
    };
    let mut detail = text.to_owned();
    if let Some(error) = &health.last_error {
        detail.push_str(&format!(" (failing: {error})"));
    }
    if let Some(summary) = problems::summary(&health.problems) {
        detail.push_str(&format!("; {summary}"));
    }
    let mut check = Check::new(format!("source-{}", health.source), passed, detail);
    check.notes = health.problems.iter().map(ToString::to_string).collect();
    check
}

pub async fn readyz(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    report("readyz", &readiness(&state), &Query::parse(query.as_deref())).into_response()
}

/// The agent answers: its one check is that this handler runs.
pub async fn healthz(RawQuery(query): RawQuery) -> Response {
    let ping = Check::new("ping", true, "the agent answers");
    report("healthz", &[ping], &Query::parse(query.as_deref())).into_response()
}

#[cfg(test)]
mod tests;
