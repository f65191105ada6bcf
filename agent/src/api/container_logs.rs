//! kubelet's `GET /containerLogs/{namespace}/{pod}/{container}`: a container's logs as
//! plain text, read from its CRI files by [`crate::runtime::logs::read`], with kubelet's
//! query parameters `follow`, `tailLines`, `sinceSeconds`, `sinceTime` (RFC 3339),
//! `timestamps`, `previous` and `limitBytes`. The pod's directory is the one of its
//! current UID in the merged snapshot (a pod recreated with a new UID has its own).
//! The run read is the one the pod's status names, as kubelet chooses it
//! ([`outpost_core::container_log::choose`]): `previous` is `lastState.terminated`; else
//! the running instance, or the last run that ended. Its containerd record says which
//! log file is its run. A dry-run agent runs no containers and has no statuses: it reads
//! the files there are, the newest run (or the one before it, `previous`), as `outpost
//! logs` does while the agent is down. An unknown pod or container is 404, a bad
//! parameter or a container with no such run 400 (kubelet's message), all a
//! `metav1.Status`.
//!
//! The reading is blocking IO on a `spawn_blocking` thread that feeds a bounded channel
//! the response body streams from; when the client goes away the channel closes, and
//! the reader stops at its next write or within [`read`](crate::runtime::logs::read)'s
//! stop check, so no thread or inotify watch outlives the request.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::{mpsc, oneshot};

use super::AppState;
use crate::error_chain::describe;
use crate::runtime::container;
use crate::runtime::logs::read::{self, ContainerLog, Options};
use crate::runtime::logs::{self, locate};

/// Chunks of output in flight between the reader and the client: the reader blocks
/// (so a slow client slows it, and memory stays bounded) when they are all taken. With
/// [`CHUNK_BYTES`], at most 128 KiB per stream wait for a client; 50 streams catching up
/// on whole logs at once hold 6 MiB, not the 50 MiB that 16 chunks of up to 64 KiB held.
const CHANNEL_CHUNKS: usize = 4;
/// The reader sends what it has once it holds this much (or when it has read all
/// there is for now); a chunk never holds more.
const CHUNK_BYTES: usize = 32 * 1024;

/// A query parameter that cannot be used (a 400): which one, and what it takes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{key} {value:?}: expected true or false")]
    Boolean { key: String, value: String },
    #[error("{key} {value:?}: expected a whole number")]
    Number { key: String, value: String },
    #[error("tailLines {0:?}: expected a number of lines, 0 or more")]
    TailLines(String),
    #[error("limitBytes {0:?}: expected a number of bytes, 1 or more")]
    LimitBytes(String),
    #[error("sinceSeconds {0:?}: expected a number of seconds, 1 or more")]
    SinceSeconds(String),
    #[error(
        "sinceTime {value:?}: expected an RFC 3339 time such as 2024-05-01T12:00:00Z ({source})"
    )]
    SinceTime {
        value: String,
        #[source]
        source: jiff::Error,
    },
    #[error("sinceSeconds and sinceTime: give at most one of them")]
    SinceBoth,
    #[error(
        "follow and previous: a previous run has ended, so it cannot be followed; give one of \
         them"
    )]
    FollowPrevious,
}

/// Parses the query into read options; `now` anchors `sinceSeconds`.
pub fn parse(query: Option<&str>, now: Timestamp) -> Result<Options, Error> {
    let mut options = Options::default();
    let mut since_seconds = None;
    let mut since_time = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match &*key {
            "follow" => options.follow = boolean(&key, &value)?,
            "previous" => options.previous = boolean(&key, &value)?,
            "timestamps" => options.timestamps = boolean(&key, &value)?,
            "tailLines" => {
                let n = number(&key, &value)?;
                options.tail =
                    Some(usize::try_from(n).map_err(|_| Error::TailLines(value.to_string()))?);
            }
            "limitBytes" => {
                let n = number(&key, &value)?;
                options.limit_bytes = Some(
                    u64::try_from(n)
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| Error::LimitBytes(value.to_string()))?,
                );
            }
            "sinceSeconds" => {
                let n = number(&key, &value)?;
                if n <= 0 {
                    return Err(Error::SinceSeconds(value.to_string()));
                }
                since_seconds = Some(n);
            }
            "sinceTime" => {
                since_time = Some(
                    value
                        .parse::<Timestamp>()
                        .map_err(|source| Error::SinceTime { value: value.to_string(), source })?,
                );
            }
            // Other parameters (`container`, `insecureSkipTLSVerifyBackend`, …) do not
            // apply here; kubelet ignores unknown ones too.
            _ => {}
        }
    }
    options.since = match (since_seconds, since_time) {
        (Some(_), Some(_)) => {
            return Err(Error::SinceBoth);
        }
        (Some(seconds), None) => Some(
            now.checked_sub(jiff::SignedDuration::from_secs(seconds)).unwrap_or(Timestamp::MIN),
        ),
        (None, time) => time,
    };
    if options.follow && options.previous {
        return Err(Error::FollowPrevious);
    }
    Ok(options)
}

/// `true`/`false` as Go's `strconv.ParseBool` reads them; a key alone is true.
fn boolean(key: &str, value: &str) -> Result<bool, Error> {
    match value {
        "" | "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(Error::Boolean { key: key.to_owned(), value: value.to_owned() }),
    }
}

fn number(key: &str, value: &str) -> Result<i64, Error> {
    value.parse().map_err(|_| Error::Number { key: key.to_owned(), value: value.to_owned() })
}

/// Whether a request streams without end (`/containerLogs/...?follow=true`), so that the
/// whole-request timeout does not apply to it.
pub fn streams(uri: &Uri) -> bool {
    uri.path().starts_with("/containerLogs/")
        && form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .any(|(key, value)| key == "follow" && boolean(&key, &value).unwrap_or(false))
}

/// The names of a pod's containers, init and ephemeral ones included.
fn container_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    let regular = spec.containers.iter().map(|c| c.name.clone());
    let init = spec.init_containers.iter().flatten().map(|c| c.name.clone());
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| c.name.clone());
    regular.chain(init).chain(ephemeral).collect()
}

/// A `metav1.Status` failure, as kubelet and the API server answer.
pub(super) fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

pub async fn container_logs(
    State(state): State<AppState>,
    Path((namespace, name, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let options = match parse(query.as_deref(), Timestamp::now()) {
        Ok(options) => options,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    let target = match find(&state, namespace, name, container) {
        Ok(target) => target,
        Err(response) => return *response,
    };
    let run = match choose_run(&state, &target, options.previous).await {
        Ok(run) => run,
        Err(response) => return *response,
    };
    stream(&state, target, run, options).await
}

/// The container a request names, and its pod's status.
#[derive(Debug)]
struct Target {
    namespace: String,
    name: String,
    uid: String,
    container: String,
    /// The worker's status; before it has one (the agent just started), the pod's own,
    /// as kubelet falls back to the API server's.
    status: Option<Arc<PodStatus>>,
}

impl Target {
    fn pod(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The pod (in the merged snapshot, its current UID) and container the path names; 404
/// if either is unknown.
fn find(
    state: &AppState,
    namespace: String,
    name: String,
    container: String,
) -> Result<Target, Box<Response>> {
    let snapshot = state.snapshot.load();
    let pod_name = format!("{namespace}/{name}");
    let Some(pod) = snapshot.pods.iter().map(|(_, pod)| pod).find(|pod| {
        pod.metadata.namespace.as_deref() == Some(&namespace)
            && pod.metadata.name.as_deref() == Some(&name)
    }) else {
        let message = format!("pod {pod_name} not found on this node");
        return Err(Box::new(status(StatusCode::NOT_FOUND, "NotFound", message)));
    };
    let names = container_names(pod);
    if !names.contains(&container) {
        let message = format!(
            "container {container:?} not found in pod {pod_name}; its containers: {}",
            names.join(", ")
        );
        return Err(Box::new(status(StatusCode::NOT_FOUND, "NotFound", message)));
    }
    let uid = outpost_core::pod::uid(pod).to_owned();
    let status = state.statuses.get(&uid).or_else(|| pod.status.clone().map(Arc::new));
    Ok(Target { namespace, name, uid, container, status })
}

/// The container instance and run (log file) the pod's status names for this request,
/// as kubelet chooses them; `None` in a dry run (no runtime, no statuses: the files
/// decide).
async fn choose_run(
    state: &AppState,
    target: &Target,
    previous: bool,
) -> Result<Option<(String, u32)>, Box<Response>> {
    if state.runtime_slot.is_none() {
        return Ok(None);
    }
    let pod_status = target.status.clone().unwrap_or_default();
    let id = outpost_core::container_log::choose(
        &pod_status,
        &target.pod(),
        &target.container,
        previous,
    )
    .map_err(|unavailable| {
        Box::new(status(StatusCode::BAD_REQUEST, "BadRequest", unavailable.to_string()))
    })?;
    let run = run_of(state, &id).await?;
    Ok(Some((id, run)))
}

/// Opens the run's file and answers with its content as the reader produces it.
async fn stream(
    state: &AppState,
    target: Target,
    run: Option<(String, u32)>,
    options: Options,
) -> Response {
    let Target { namespace, name, uid, container, .. } = &target;
    let dir: PathBuf = logs::pod_log_dir(&state.pod_log_dir, namespace, name, uid).join(container);
    let span = tracing::debug_span!(
        "container logs",
        pod.namespace = %namespace,
        pod.name = %name,
        pod.uid = %uid,
        container = %container,
        container_id = run.as_ref().map(|(id, _)| id.as_str()),
        run = run.as_ref().map(|(_, n)| *n),
        follow = options.follow
    );
    let pod = target.pod();
    let (opened_tx, opened_rx) = oneshot::channel();
    let (chunks_tx, mut chunks_rx) = mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
    tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        let opened = match run {
            Some((_, run)) => ContainerLog::open_run(&dir, run, options),
            None => ContainerLog::open(&dir, &pod, options),
        };
        let log = match opened {
            Ok(log) => {
                let _ = opened_tx.send(Ok(()));
                log
            }
            Err(e) => {
                let _ = opened_tx.send(Err(e));
                return;
            }
        };
        let stop = chunks_tx.clone();
        let mut out = ChannelWriter { tx: chunks_tx, buffer: Vec::new() };
        match log.copy_to(&mut out, &|| stop.is_closed()) {
            Ok(()) => {
                let _ = out.flush();
            }
            Err(read::Error::Output(_)) => tracing::debug!("the client went away"),
            Err(e) => tracing::warn!(error = %e, "reading container logs failed"),
        }
    });
    match opened_rx.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return open_failure(namespace, name, container, error),
        Err(_) => {
            let message =
                format!("the log reader of container {container} of pod {} stopped", target.pod());
            return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message);
        }
    }
    let body = futures::stream::poll_fn(move |cx| {
        chunks_rx.poll_recv(cx).map(|chunk| chunk.map(Ok::<_, io::Error>))
    });
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(body)).into_response()
}

/// The run (log file) of container instance `id`, from its containerd record.
async fn run_of(state: &AppState, id: &str) -> Result<u32, Box<Response>> {
    let runtime = super::runtime::unavailable(state.runtime_slot.as_ref())
        .map_err(|(code, reason, message)| Box::new(status(code, reason, message)))?;
    match container::run_of(&runtime.containerd, id).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(Box::new(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("container {id} is gone from the runtime, and its logs with it"),
        ))),
        Err(e) => {
            let (code, reason) = if e.is_unreachable() {
                (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable")
            } else {
                (StatusCode::INTERNAL_SERVER_ERROR, "InternalError")
            };
            Err(Box::new(status(code, reason, describe(&e))))
        }
    }
}

/// The answer when the log cannot be opened.
fn open_failure(namespace: &str, name: &str, container: &str, error: read::Error) -> Response {
    let pod = format!("{namespace}/{name}");
    match error {
        read::Error::Locate(locate::Error::NoPreviousRun { .. }) => status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("previous terminated container {container:?} in pod {pod} not found"),
        ),
        read::Error::Locate(locate::Error::NoRun { .. })
        | read::Error::Locate(locate::Error::List { .. }) => status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("container {container:?} in pod {pod} is waiting to start: it has no logs yet"),
        ),
        read::Error::Read { path, source } if source.kind() == io::ErrorKind::NotFound => status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "container {container:?} in pod {pod} has no log file {} (yet)",
                path.display()
            ),
        ),
        other => {
            tracing::warn!(pod.namespace = namespace, pod.name = name, container, error = %other, "cannot open container logs");
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                format!("cannot read the logs of container {container:?} in pod {pod}: {other}"),
            )
        }
    }
}

/// Collects output and sends it down the channel in chunks; a closed channel (the
/// client went away) fails the write, which ends the reader.
#[derive(Debug)]
struct ChannelWriter {
    tx: mpsc::Sender<Bytes>,
    buffer: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        // A full chunk goes as it is; a small one (a line, following) as a copy of its
        // size, the chunk's buffer kept for the next.
        let chunk = if self.buffer.len() * 2 < self.buffer.capacity() {
            let small = Bytes::copy_from_slice(&self.buffer);
            self.buffer.clear();
            small
        } else {
            Bytes::from(std::mem::take(&mut self.buffer))
        };
        self.tx
            .blocking_send(chunk)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChannelWriter {
    /// Takes what fits in the chunk being filled (allocated once, at its full size, so
    /// it never grows past [`CHUNK_BYTES`]), sending it when full.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buffer.capacity() == 0 {
            self.buffer.reserve_exact(CHUNK_BYTES);
        }
        let room = CHUNK_BYTES.saturating_sub(self.buffer.len());
        let taken = bytes.len().min(room);
        self.buffer.extend_from_slice(&bytes[..taken]);
        if self.buffer.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests;
