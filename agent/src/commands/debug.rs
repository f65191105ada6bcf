//! `outpost debug NAMESPACE/POD --image IMAGE [--target C] [-c NAME] [-i] [-t] [-- CMD...]`
//! (X4): adds an ephemeral container to a static pod through the agent's local API
//! (`POST /pods/{namespace}/{name}/ephemeralcontainers`, which needs write credentials),
//! as `kubectl debug` does for an API pod through the API server; with `-i`, waits until
//! it runs and attaches to it (`/attach`, as `kubectl attach`), and exits with its exit
//! code.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerState, Pod};
use serde_json::{Value, json};

use super::client::{self, Client, split_pod};
use super::exec::{self, connect, terminal};
use crate::cli::DebugArgs;

/// How long `-i` waits for the container to run (an image pull included).
const START_WAIT: Duration = Duration::from_secs(300);
/// How often the pod is read while waiting.
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error(transparent)]
    Attach(#[from] exec::Error),
    #[error("ephemeral container {container} of pod {pod} did not start: {reason}")]
    NotStarted { pod: String, container: String, reason: String },
    #[error(
        "ephemeral container {container} of pod {pod} is not running after {waited:?}; see outpost describe {pod}"
    )]
    Timeout { pod: String, container: String, waited: Duration },
}

/// Runs `outpost debug`; with `-i`, the debug container's exit code is the process's.
pub fn debug(args: &DebugArgs) -> Result<ExitCode, Error> {
    let client = Client::new(&args.client)?;
    let tty = exec::tty_if_terminal(args.tty);
    let code = client::runtime()?.block_on(run(&client, args, tty))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)))
}

async fn run(client: &Client, args: &DebugArgs, tty: bool) -> Result<i32, Error> {
    let (namespace, name) = split_pod(&args.pod);
    let shown = format!("{namespace}/{name}");
    let container = match &args.container {
        Some(container) => container.clone(),
        None => {
            let generated = format!("debugger-{}", suffix());
            eprintln!("Defaulting debug container name to {generated}.");
            generated
        }
    };
    let url = client.url(&["pods", namespace, name, "ephemeralcontainers"], &[]);
    let _: Value = client.post_json(url, &container_spec(args, &container, tty)).await?;
    if !args.stdin {
        return Ok(0);
    }
    wait_running(client, (namespace, name), &container).await?;
    eprintln!("If you don't see a command prompt, try pressing enter.");
    let query = attach_query(tty);
    let url = client.url(&["attach", namespace, name, &container], &query);
    let socket = connect::connect(client, &url).await?;
    // Raw only while attached: what follows prints as usual.
    let raw = match tty {
        true => Some(terminal::RawMode::enter().map_err(exec::Error::Terminal)?),
        false => None,
    };
    let code = exec::stream(socket, true, tty).await.map_err(|e| match e {
        exec::Error::NoStatus => Error::NotStarted {
            pod: shown.clone(),
            container: container.clone(),
            reason: "the attach ended without the container's exit status".to_owned(),
        },
        e => Error::Attach(e),
    })?;
    drop(raw);
    // An attach ends with Success as kubelet's does; the exit code is the container's, as
    // `kubectl run --attach` reads it from the status.
    Ok(exit_code(client, (namespace, name), &container).await?.unwrap_or(code))
}

/// How long the exit is waited for in the status, once the attach ended.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// The exit code of the ephemeral container `container`, once its status says it
/// terminated; `None` if it does not say so within [`EXIT_WAIT`] (still running: the
/// attach ended another way).
async fn exit_code(
    client: &Client,
    pod: (&str, &str),
    container: &str,
) -> Result<Option<i32>, Error> {
    let terminated = |state: Option<&ContainerState>| {
        state.and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code)
    };
    watch_state(client, pod, container, EXIT_WAIT, terminated).await
}

/// The ephemeral container kubectl debug makes of these flags.
fn container_spec(args: &DebugArgs, name: &str, tty: bool) -> Value {
    let mut spec = json!({
        "name": name,
        "image": args.image,
        "stdin": args.stdin,
        "tty": tty,
        "terminationMessagePolicy": "File",
    });
    if let Some(target) = &args.target {
        spec["targetContainerName"] = json!(target);
    }
    if let Some(policy) = &args.image_pull_policy {
        spec["imagePullPolicy"] = json!(policy);
    }
    if !args.command.is_empty() {
        spec["command"] = json!(args.command);
    }
    spec
}

/// kubectl attach's streams: stdin and stdout, stderr apart unless there is a terminal.
fn attach_query(tty: bool) -> Vec<(&'static str, String)> {
    let streams = [("input", true), ("output", true), ("error", !tty), ("tty", tty)];
    streams.into_iter().filter(|(_, on)| *on).map(|(name, _)| (name, "1".to_owned())).collect()
}

/// Five lowercase letters and digits, as kubectl's generated names end.
fn suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5).map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())])).collect()
}

/// Waits until the ephemeral container `container` runs; its termination (or a start
/// that keeps failing) is an error.
async fn wait_running(
    client: &Client,
    (namespace, name): (&str, &str),
    container: &str,
) -> Result<(), Error> {
    let shown = format!("{namespace}/{name}");
    let running = |state: Option<&ContainerState>| {
        let state = state?;
        if state.running.is_some() {
            return Some(Ok(()));
        }
        not_starting(state).map(Err)
    };
    match watch_state(client, (namespace, name), container, START_WAIT, running).await? {
        Some(Ok(())) => Ok(()),
        Some(Err(reason)) => {
            Err(Error::NotStarted { pod: shown, container: container.to_owned(), reason })
        }
        None => {
            let container = container.to_owned();
            Err(Error::Timeout { pod: shown, container, waited: START_WAIT })
        }
    }
}

/// Reads the pod every [`POLL`] until `decide` makes something of the state of its
/// ephemeral container `container`; `None` once `wait` has passed.
async fn watch_state<T>(
    client: &Client,
    (namespace, name): (&str, &str),
    container: &str,
    wait: Duration,
    decide: impl Fn(Option<&ContainerState>) -> Option<T>,
) -> Result<Option<T>, Error> {
    let started = Instant::now();
    loop {
        let pod: Pod = client.get_json(client.url(&["pods", namespace, name], &[])).await?;
        if let Some(found) = decide(ephemeral_state(&pod, container).as_ref()) {
            return Ok(Some(found));
        }
        if started.elapsed() > wait {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}

fn ephemeral_state(pod: &Pod, container: &str) -> Option<ContainerState> {
    let statuses = pod.status.as_ref()?.ephemeral_container_statuses.as_ref()?;
    statuses.iter().find(|s| s.name == container)?.state.clone()
}

/// Why a container that is not running will not run: terminated, or waiting for a reason
/// that needs the operator (an image that cannot be pulled, a config that cannot be
/// made); a start under way or a pull being tried is waited for.
fn not_starting(state: &ContainerState) -> Option<String> {
    if let Some(terminated) = &state.terminated {
        let reason = terminated.reason.as_deref().unwrap_or("Terminated");
        return Some(format!("{reason} (exit code {})", terminated.exit_code));
    }
    let waiting = state.waiting.as_ref()?;
    let reason = waiting.reason.as_deref().unwrap_or_default();
    const STUCK: &[&str] = &[
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerError",
        "CreateContainerConfigError",
    ];
    let message = waiting.message.as_deref().unwrap_or_default();
    STUCK.contains(&reason).then(|| format!("{reason}: {message}"))
}

#[cfg(test)]
mod tests;
