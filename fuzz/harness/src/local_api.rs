//! `local_api`: requests to the local HTTP API, built from the input and sent through the
//! real router ([`outpost::api::app`]: authentication, request timeout, every route) in
//! process, over a state that needs no containerd: one desired pod, the push source over
//! a fresh state directory, bearer token [`TOKEN`], no runtime connected.
//!
//! The input is up to [`MAX_REQUESTS`] requests separated by NUL bytes, each written as
//! HTTP/1.1 is, without the version: `METHOD TARGET`, header lines `Name: value`, an empty
//! line, the body. A request that cannot be built (a bad method, URI or header) is what
//! the HTTP server would refuse before routing it: it is skipped.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use futures::{FutureExt as _, StreamExt as _};
use http::{HeaderName, HeaderValue, Request, StatusCode, header};
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use outpost::api::Auth;
use outpost::api::{self, runtime::RuntimeSlot, status::Info};
use outpost::checkpoint::Checkpoints;
use outpost::podconfig::{Snapshot, SnapshotHandle};
use outpost::source::metrics::SourceMetrics;
use outpost::source::{EventStream, Refresh, push};
use outpost_core::pod::Source;
use tower::ServiceExt as _;

/// The bearer token the API takes.
pub const TOKEN: &str = "fuzz-token";
/// At most this many requests per input.
pub const MAX_REQUESTS: usize = 8;
/// A response body is read up to this many bytes.
const MAX_RESPONSE: usize = 1 << 20;

/// What stays from one input to the next, per thread: the runtime and the detached
/// logger `/debug/log-level` changes.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    log_level: outpost::logging::LogLevel,
    _logger: Box<dyn tracing::Subscriber + Send + Sync>,
}

thread_local! {
    static FIXTURE: RefCell<Option<Fixture>> = const { RefCell::new(None) };
}

/// Sends the input's requests, in order, to a fresh API and checks each answer.
pub fn local_api(data: &[u8]) {
    FIXTURE.with_borrow_mut(|fixture| {
        if fixture.is_none() {
            *fixture = Some(setup());
        }
        if let Some(fixture) = fixture {
            fixture.runtime.block_on(run(fixture, data));
        }
    });
}

fn setup() -> Fixture {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let runtime = runtime.unwrap_or_else(|e| panic!("cannot start a tokio runtime: {e}"));
    let (log_level, logger) = outpost::logging::detached("info")
        .unwrap_or_else(|e| panic!("cannot make the detached logger: {e}"));
    Fixture { runtime, log_level, _logger: Box::new(logger) }
}

async fn run(fixture: &Fixture, data: &[u8]) {
    let Ok(state_dir) = crate::scratch_dir() else { return };
    let Some((app, mut events)) = app(fixture, state_dir.path()) else { return };
    for request in data.split(|&b| b == 0).take(MAX_REQUESTS).filter_map(request) {
        let response = app.clone().oneshot(request).await;
        let Ok(response) = response;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            assert!(
                response.headers().contains_key(header::WWW_AUTHENTICATE),
                "401 without a challenge"
            );
        }
        let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE);
        let _ = body.collect().await;
        // What the push source sent the merge.
        while let Some(Some(_)) = events.next().now_or_never() {}
    }
}

/// The API over a snapshot with one pod and a push source over `state_dir`, which also
/// holds the token file.
fn app(fixture: &Fixture, state_dir: &Path) -> Option<(Router, EventStream)> {
    let token = state_dir.join("token");
    std::fs::write(&token, TOKEN)
        .and_then(|()| std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", token.display()));
    let checkpoints = Checkpoints::new(state_dir);
    let config = push::Config {
        node_name: "fuzz-node".to_owned(),
        checkpoints,
        metrics: SourceMetrics::default(),
    };
    let (push, events) = push::open(config).ok()?;
    let snapshot = snapshot();
    let options = api::Options {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        auth: Auth {
            token_file: Some(token),
            tls: None,
            client_ca_file: None,
            anonymous_loopback_reads: false,
            access: Default::default(),
        },
        snapshot,
        push: Some(push),
        refresh: Some(Refresh::default()),
        statuses: outpost::status::StatusStore::default(),
        runtime: Some(Default::default()),
        metrics: prometheus_client::registry::Registry::default(),
        events: outpost::apiserver::Recorder::default(),
        pod_log_dir: PathBuf::from(state_dir).join("pods"),
        log_level: fixture.log_level.clone(),
        info: Info {
            node_name: "fuzz-node".to_owned(),
            started: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            watcher: "inotify".to_owned(),
            runtime: None,
            sync: None,
            certificates: Vec::new(),
        },
        ebpf: outpost::ebpf::Handle::default(),
        audit: outpost::audit::ManifestAudit::new(64, None),
        runtime_slot: Some(RuntimeSlot::default()),
        serving: None,
        debug: outpost::debug_containers::DebugContainers::new(
            PathBuf::from(state_dir).join("pods"),
        ),
        apiserver: None,
        stats: api::stats::Endpoints::default(),
        streaming: api::streams::Limits::default(),
    };
    let app = api::app(options).unwrap_or_else(|e| panic!("cannot build the local API: {e}"));
    Some((app, events))
}

/// A snapshot holding `default/web-fuzz-node` from the file source.
fn snapshot() -> SnapshotHandle {
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("default".to_owned());
    pod.metadata.name = Some("web-fuzz-node".to_owned());
    pod.metadata.uid = Some("0123456789abcdef0123456789abcdef".to_owned());
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "web".to_owned(),
            image: Some("busybox".to_owned()),
            ..Default::default()
        }],
        ..Default::default()
    });
    let snapshot = Snapshot { pods: vec![(Source::File, Arc::new(pod))], ..Default::default() };
    SnapshotHandle::from(snapshot)
}

/// One request of the input: `METHOD TARGET\nName: value\n...\n\nbody`.
fn request(text: &[u8]) -> Option<Request<Body>> {
    let (head, body) = match text.windows(2).position(|w| w == b"\n\n") {
        Some(end) => (&text[..end], &text[end + 2..]),
        None => (text, &[][..]),
    };
    let mut lines = head.split(|&b| b == b'\n');
    let first = lines.next()?;
    let space = first.iter().position(|&b| b == b' ')?;
    let (method, target) = (&first[..space], &first[space + 1..]);
    let mut builder = Request::builder()
        .method(http::Method::from_bytes(method).ok()?)
        .uri(http::Uri::try_from(target).ok()?);
    for line in lines {
        let colon = line.iter().position(|&b| b == b':')?;
        let name = HeaderName::from_bytes(&line[..colon]).ok()?;
        let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).ok()?;
        builder = builder.header(name, value);
    }
    builder.body(Body::from(body.to_vec())).ok()
}
