//! `outpost logs NAMESPACE/POD`: a container's logs through the agent's local API
//! (`/containerLogs/{namespace}/{pod}/{container}`, kubelet's endpoint and query
//! parameters), streamed to stdout as they come. The container defaults to the pod's
//! only one (asked of `/pods/{namespace}/{name}`). When the agent cannot be reached at
//! all, the logs are read from the files instead ([`files::print_logs`]), so they
//! stay readable while the agent is down; any other error (401, 404) is shown as is.

pub mod files;

use std::io::{self, Write};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;

use self::files::print_logs;
use super::client::{self, Client, split_pod};
use crate::cli::{LogsArgs, LogsCommand};
use crate::runtime::logs::DEFAULT_POD_LOG_DIR;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("--since {0:?}: expected a positive duration such as 10s, 5m or 2h")]
    Since(String),
    #[error("pod {pod} has several containers ({}): choose one with -c", .names.join(", "))]
    Containers { pod: String, names: Vec<String> },
    #[error("pod {pod} has no containers")]
    NoContainers { pod: String },
    #[error(transparent)]
    Files(#[from] files::Error),
    #[error("cannot write the logs")]
    Output(#[source] io::Error),
}

/// Runs `outpost logs`; a closed stdout (`| head`) ends it quietly.
pub fn logs(command: &LogsCommand) -> Result<ExitCode, Error> {
    let since = match command.since.as_deref() {
        Some(raw) => Some(
            outpost_core::duration::positive(raw).ok_or_else(|| Error::Since(raw.to_owned()))?,
        ),
        None => None,
    };
    let client = Client::new(&command.client)?;
    let mut out = io::stdout().lock();
    let streamed = client::runtime()?.block_on(stream(&client, command, since, &mut out));
    let result = match streamed {
        Err(Error::Client(client::Error::Unreachable { url, reason })) => {
            let args = file_args(&command.logs, &client);
            eprintln!(
                "outpost: the agent at {url} cannot be reached ({reason}); reading the log files under {}{}",
                args.pod_log_dir.display(),
                if since.is_some() { " (--since is ignored)" } else { "" }
            );
            print_logs(&args, &mut out).map_err(Error::from)
        }
        other => other,
    };
    match result {
        Err(Error::Output(e) | Error::Files(files::Error::Output(e)))
            if e.kind() == io::ErrorKind::BrokenPipe =>
        {
            Ok(ExitCode::SUCCESS)
        }
        other => other.map(|()| ExitCode::SUCCESS),
    }
}

async fn stream(
    client: &Client,
    command: &LogsCommand,
    since: Option<std::time::Duration>,
    out: &mut impl Write,
) -> Result<(), Error> {
    let args = &command.logs;
    let (namespace, name) = split_pod(&args.pod);
    let container = match &args.container {
        Some(container) => container.clone(),
        None => {
            let pod: Pod = client.get_json(client.url(&["pods", namespace, name], &[])).await?;
            only_container(&pod, &format!("{namespace}/{name}"))?
        }
    };
    let url = client.url(&["containerLogs", namespace, name, &container], &query(args, since));
    let shown = url.to_string();
    let mut response = client.get(url).await?;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|source| client::Error::Read { url: shown.clone(), source })?
    {
        out.write_all(&chunk).map_err(Error::Output)?;
        out.flush().map_err(Error::Output)?;
    }
    Ok(())
}

/// kubelet's `/containerLogs` query parameters for `args`.
pub fn query(args: &LogsArgs, since: Option<std::time::Duration>) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if args.follow {
        query.push(("follow", "true".to_owned()));
    }
    if let Some(n) = args.tail {
        query.push(("tailLines", n.to_string()));
    }
    if args.previous {
        query.push(("previous", "true".to_owned()));
    }
    if args.timestamps {
        query.push(("timestamps", "true".to_owned()));
    }
    if let Some(since) = since {
        // Whole seconds, rounded up: never less than asked for.
        let seconds = since.as_secs() + u64::from(since.subsec_nanos() > 0);
        query.push(("sinceSeconds", seconds.to_string()));
    }
    query
}

/// The name of the pod's only container; several are an error that lists them.
pub fn only_container(pod: &Pod, shown: &str) -> Result<String, Error> {
    let names: Vec<String> =
        pod.spec.iter().flat_map(|s| &s.containers).map(|c| c.name.clone()).collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::NoContainers { pod: shown.to_owned() }),
        _ => Err(Error::Containers { pod: shown.to_owned(), names }),
    }
}

/// The arguments for reading the files: the agent config's pod log dir unless
/// `--pod-log-dir` says otherwise.
fn file_args(args: &LogsArgs, client: &Client) -> LogsArgs {
    let configured = client.agent_config().map(|c| c.node.pod_log_dir.clone());
    let pod_log_dir = match configured {
        Some(dir) if args.pod_log_dir.as_os_str() == DEFAULT_POD_LOG_DIR => dir,
        _ => args.pod_log_dir.clone(),
    };
    LogsArgs {
        pod: args.pod.clone(),
        container: args.container.clone(),
        follow: args.follow,
        tail: args.tail,
        previous: args.previous,
        timestamps: args.timestamps,
        pod_log_dir,
    }
}

#[cfg(test)]
mod tests;
