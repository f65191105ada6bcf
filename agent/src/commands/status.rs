//! `outpost status`: the agent at a glance from its `/status`: node, version and uptime,
//! each pod source (and the manifests it rejects or warns about), the API server, the
//! runtime and the pods. Exits 0 when the agent is ready, 1 when it is not (or cannot be
//! reached): a rejected manifest alone does not make it unready.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::ExitCode;

use super::client::{self, Client};
use super::printers::{age, human_duration, table};
use crate::api::status::AgentStatus;
use crate::cli::{StatusArgs, StatusOutput};
use crate::podconfig::SourceState;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("cannot write the status")]
    Output(#[source] io::Error),
}

/// Runs `outpost status`.
pub fn status(args: &StatusArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let status: AgentStatus =
        client::runtime()?.block_on(client.get_json(client.url(&["status"], &[])))?;
    let text = match args.output {
        Some(StatusOutput::Json) => {
            let mut text = serde_json::to_string_pretty(&status).unwrap_or_default();
            text.push('\n');
            text
        }
        None => render(&status),
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Output(e)),
        _ => {}
    }
    Ok(if status.ready { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The text of `outpost status` (ages against the agent's own clock, `status.now`).
pub fn render(status: &AgentStatus) -> String {
    let now = status.now;
    let mut out = String::new();
    let mut field = |label: &str, value: &str| {
        let _ = writeln!(out, "{:<12}{value}", format!("{label}:"));
    };
    field("Node", &status.node_name);
    field("Version", &status.version);
    field("Uptime", &human_duration(now.duration_since(status.started)));
    field("Ready", if status.ready { "yes" } else { "no" });
    let api = &status.api_server;
    let api_text = match (api.configured, api.reachable) {
        (false, _) => "not configured (no kubeconfig)".to_owned(),
        (true, reachable) => format!(
            "{}, {} pod status update(s) queued",
            if reachable { "reachable" } else { "unreachable" },
            api.queued_status_updates
        ),
    };
    field("API server", &api_text);
    let runtime = match &status.runtime {
        None => "none (dry run)".to_owned(),
        Some(r) => format!(
            "containerd {} ({}, {}, namespace {})",
            if r.connected { "connected" } else { "not connected" },
            if r.managed { "managed by the agent" } else { "external" },
            r.socket.display(),
            r.namespace
        ),
    };
    field("Runtime", &runtime);
    field("Watcher", &status.watcher);
    let p = status.pods;
    field(
        "Pods",
        &format!(
            "{} total, {} running, {} pending, {} succeeded, {} failed, {} failing",
            p.total, p.running, p.pending, p.succeeded, p.failed, p.failing
        ),
    );
    let mut certificates = String::new();
    for c in &status.certificates {
        let until = c.not_after.map_or_else(|| "-".to_owned(), |t| t.to_string());
        let mut text = match c.state.as_str() {
            "none" => "none yet".to_owned(),
            "expiring-soon" => format!("WARNING: expires within 7 days, at {until}"),
            "expired" => format!("EXPIRED at {until}"),
            _ => format!("valid until {until}"),
        };
        if let Some(deadline) = c.rotation_deadline {
            let _ = write!(text, ", renewal at {deadline}");
        }
        if let Some(problem) = &c.problem {
            let _ = write!(text, " ({problem})");
        }
        let _ = writeln!(certificates, "  {}: {text}", c.name);
    }
    if !certificates.is_empty() {
        out.push_str("Certificates:\n");
        out.push_str(&certificates);
    }
    out.push_str("Sources:\n");
    let mut rows =
        vec![["SOURCE", "STATE", "LAST SUCCESS", "LAST ERROR"].map(str::to_owned).to_vec()];
    for s in &status.sources {
        rows.push(vec![
            s.name.clone(),
            match s.state {
                SourceState::Live => "live",
                SourceState::Checkpoint => "checkpoint",
                SourceState::NeverSeen => "never seen",
            }
            .to_owned(),
            s.last_success.map_or_else(|| "never".to_owned(), |t| format!("{} ago", age(t, now))),
            s.last_error.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    for line in table(&rows).lines() {
        let _ = writeln!(out, "  {line}");
    }
    let mut rows = vec![["SOURCE", "MANIFEST", "FIRST PROBLEM"].map(str::to_owned).to_vec()];
    for s in &status.sources {
        for p in &s.problems {
            rows.push(vec![s.name.clone(), p.severity.to_string(), p.to_string()]);
        }
    }
    if rows.len() > 1 {
        out.push_str("Manifest problems:\n");
        for line in table(&rows).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
