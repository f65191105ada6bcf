//! `outpost pods`: the agent's pods from its local API (`/pods`), as `kubectl get pods`
//! prints them: NAMESPACE (unless `-n`), NAME, READY, STATUS, RESTARTS, AGE and SOURCE;
//! `-o wide` adds IP and NODE; `-o json` / `-o yaml` print the `v1 PodList`. Every
//! namespace is shown by default: a node has few pods.

use std::io::{self, Write};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::client::{self, Client};
use super::printers::{pod_row, table};
use crate::cli::{PodsArgs, PodsOutput};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("cannot write the pods as YAML")]
    Yaml(#[source] serde_saphyr::SerializeError),
    #[error("cannot write the pods")]
    Output(#[source] io::Error),
}

/// Runs `outpost pods`.
pub fn pods(args: &PodsArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let list: k8s_openapi::List<Pod> =
        client::runtime()?.block_on(client.get_json(client.url(&["pods"], &[])))?;
    let mut list = list;
    if let Some(namespace) = &args.namespace {
        list.items.retain(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace);
    }
    let text = match args.output {
        Some(PodsOutput::Json) => {
            let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
            text.push('\n');
            text
        }
        Some(PodsOutput::Yaml) => yaml(&list)?,
        format => render(
            &list.items,
            args.namespace.is_none(),
            format == Some(PodsOutput::Wide),
            Timestamp::now(),
        ),
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Output(e)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// `list` as YAML. Strings a YAML 1.1 reader (kubectl's) would take for a number, a
/// boolean or a null are quoted.
fn yaml(list: &k8s_openapi::List<Pod>) -> Result<String, Error> {
    serde_saphyr::to_string(list).map_err(Error::Yaml)
}

/// The table of `pods` at `now`; `No resources found.` as kubectl says when empty.
pub fn render(pods: &[Pod], namespaces: bool, wide: bool, now: Timestamp) -> String {
    if pods.is_empty() {
        return "No resources found.\n".to_owned();
    }
    let mut header = vec!["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE"];
    if wide {
        header.extend(["IP", "NODE"]);
    }
    let skip = usize::from(!namespaces);
    let mut rows = vec![header.iter().skip(skip).map(|h| (*h).to_owned()).collect()];
    let mut pods: Vec<_> = pods.iter().map(|p| pod_row(p, now)).collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for p in pods {
        let mut row = vec![p.namespace, p.name, p.ready, p.status, p.restarts, p.age, p.source];
        if wide {
            row.extend([p.ip, p.node]);
        }
        rows.push(row.into_iter().skip(skip).collect());
    }
    table(&rows)
}

#[cfg(test)]
mod tests;
