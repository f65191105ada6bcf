//! `outpost manifests audit [FILE]`: the manifest audit log from the agent's local API
//! (`/manifests/audit`), oldest first, as a table: TIME, FILE, ACTION, PODS, WRITER (who
//! wrote it: pid, uid and command line, or why that is not known). `-o json` prints the
//! agent's answer.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use super::client::{self, Client};
use super::printers::table;
use crate::audit::Entry;
use crate::cli::{AuditArgs, ManifestsCommand};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("cannot write the manifest audit")]
    Output(#[source] io::Error),
}

/// The agent's `ManifestAuditList`.
#[derive(Debug, Serialize, Deserialize)]
pub struct AuditList {
    pub kind: String,
    pub capacity: usize,
    pub dropped: u64,
    pub items: Vec<Entry>,
}

/// Runs `outpost manifests ...`.
pub fn manifests(command: &ManifestsCommand) -> Result<ExitCode, Error> {
    match command {
        ManifestsCommand::Audit(args) => audit(args),
    }
}

fn audit(args: &AuditArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let mut query = Vec::new();
    if let Some(file) = &args.file {
        query.push(("file", file.clone()));
    }
    if let Some(limit) = args.limit {
        query.push(("limit", limit.to_string()));
    }
    let url = client.url(&["manifests", "audit"], &query);
    let list: AuditList = client::runtime()?.block_on(client.get_json(url))?;
    let text = match args.output {
        Some(_) => {
            let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
            text.push('\n');
            text
        }
        None => render(&list),
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Output(e)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The table of `list`; says so when there is nothing, and how much the log dropped.
pub fn render(list: &AuditList) -> String {
    if list.items.is_empty() {
        return "No manifest changes recorded.\n".to_owned();
    }
    let header = ["TIME", "FILE", "ACTION", "PODS", "WRITER"];
    let mut rows = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    for e in &list.items {
        let pods = if e.pods.is_empty() { "<none>".to_owned() } else { e.pods.join(",") };
        rows.push(vec![
            e.time.clone(),
            e.file.clone(),
            e.action.to_string(),
            pods,
            e.writer.summary.clone(),
        ]);
    }
    let mut out = table(&rows);
    if list.dropped > 0 {
        out.push_str(&format!(
            "({} older entries were dropped: the agent keeps the newest {})\n",
            list.dropped, list.capacity
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Action, Cause, Origin, writer};

    #[test]
    fn the_table_has_one_row_per_change_and_says_what_was_dropped() {
        let entry = Entry {
            time: "2026-01-01T00:00:00Z".into(),
            source: crate::audit::ManifestSource::File,
            file: "web.yaml".into(),
            path: "/etc/outpost/manifests/web.yaml".into(),
            action: Action::Removed,
            cause: Cause::Event,
            pods: vec!["default/web-edge-1".into()],
            sha256: None,
            error: None,
            writer: writer::identify(Origin::Rescan, None),
        };
        let mut list =
            AuditList { kind: "ManifestAuditList".into(), capacity: 1, dropped: 0, items: vec![] };
        assert_eq!(render(&list), "No manifest changes recorded.\n");
        list.items.push(entry);
        list.dropped = 3;
        let text = render(&list);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("TIME "), "{text}");
        assert!(lines[1].contains("web.yaml") && lines[1].contains("removed"), "{text}");
        assert!(
            lines[1].contains("default/web-edge-1")
                && lines[1].contains("unknown (found by a rescan"),
            "{text}"
        );
        assert_eq!(lines[2], "(3 older entries were dropped: the agent keeps the newest 1)");
    }
}
