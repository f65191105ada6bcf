//! Each handler against a real server on loopback (HTTP, HTTPS, TCP, gRPC), and exec
//! through a runtime that answers as told.

use std::collections::{HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::api::core::v1::{Container, Pod};
use outpost_core::pod::FullName;
use outpost_core::pod_worker::{Found, SandboxProblem, StartFailure, StopSignal, Terminated};
use outpost_core::probe::{Handler, HttpGet, Outcome, Scheme};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::*;
use crate::runtime::container;
use crate::runtime::events::TaskEvent;
use crate::runtime::exec::ExecOutput;
use crate::worker::pod_runtime::{Created, NewContainer, SetUp, TaskState};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const TIMEOUT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Servers

/// A server on loopback, stopped when dropped.
struct Server {
    port: u16,
    task: JoinHandle<()>,
    /// The headers of each request, as received.
    requests: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    fn last_request(&self) -> HeaderMap {
        self.requests.lock().unwrap().last().cloned().expect("a request")
    }
}

/// `/ok` 200, `/error` 500, `/found` 302 to `/ok`, `/away` 302 to the same server by
/// another name (`localhost`), `/loop` 302 to itself, `/hang` never answers.
fn routes(port: u16, requests: Arc<Mutex<Vec<HeaderMap>>>) -> Router {
    let away = format!("http://localhost:{port}/ok");
    Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/error", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "broken") }))
        .route("/found", get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/ok")]) }))
        .route(
            "/away",
            get(move || async move {
                (StatusCode::FOUND, [(header::LOCATION, away)], "moved to localhost")
            }),
        )
        .route("/loop", get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]) }))
        .route("/hang", get(std::future::pending::<&'static str>))
        .layer(axum::middleware::from_fn_with_state(requests, record))
}

async fn record(
    State(requests): State<Arc<Mutex<Vec<HeaderMap>>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> impl IntoResponse {
    requests.lock().unwrap().push(request.headers().clone());
    next.run(request).await
}

async fn http_server() -> Server {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::default();
    let app = routes(port, Arc::clone(&requests));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Server { port, task, requests }
}

/// The same routes over TLS, with a self-signed certificate for `localhost`.
async fn https_server() -> Server {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::default();
    let app = routes(port, Arc::clone(&requests));
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Server { port, task, requests }
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    listener.local_addr().unwrap().port()
}

fn http_get(port: u16, path: &str) -> Handler {
    Handler::HttpGet(HttpGet {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port,
        path: path.into(),
        headers: Vec::new(),
    })
}

async fn probe(handler: &Handler) -> Outcome {
    probe_within(handler, TIMEOUT).await
}

async fn probe_within(handler: &Handler, timeout: Duration) -> Outcome {
    let prober = Prober::new().unwrap();
    prober.run(&Commands::default(), "c1", handler, timeout).await
}

fn failure(outcome: Outcome) -> String {
    match outcome {
        Outcome::Failure(message) => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// httpGet

#[tokio::test]
async fn http_200_is_a_success_sent_with_kubelets_headers() {
    let server = http_server().await;
    assert_eq!(probe(&http_get(server.port, "/ok")).await, Outcome::Success);
    let headers = server.last_request();
    assert_eq!(headers[header::USER_AGENT], "kube-probe/1.37");
    assert_eq!(headers[header::ACCEPT], "*/*");
    assert_eq!(headers[header::CONNECTION], "close");
    assert_eq!(headers[header::HOST], format!("127.0.0.1:{}", server.port));
}

#[tokio::test]
async fn http_500_is_a_failure_with_its_status_code() {
    let server = http_server().await;
    let message = failure(probe(&http_get(server.port, "/error")).await);
    assert_eq!(message, "HTTP probe failed with statuscode: 500");
}

#[tokio::test]
async fn a_redirect_on_the_same_host_is_followed() {
    let server = http_server().await;
    assert_eq!(probe(&http_get(server.port, "/found")).await, Outcome::Success);
    assert_eq!(server.requests.lock().unwrap().len(), 2, "/found, then /ok");
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_but_warned_of() {
    let server = http_server().await;
    let outcome = probe(&http_get(server.port, "/away")).await;
    assert_eq!(
        outcome,
        Outcome::Warning("Probe terminated redirects, Response body: moved to localhost".into())
    );
    assert!(outcome.is_success());
    assert_eq!(server.requests.lock().unwrap().len(), 1, "localhost is not followed");
}

#[tokio::test]
async fn redirects_stop_after_ten() {
    let server = http_server().await;
    let message = failure(probe(&http_get(server.port, "/loop")).await);
    assert!(message.ends_with(": stopped after 10 redirects"), "{message}");
    assert_eq!(server.requests.lock().unwrap().len(), 10);
}

#[tokio::test]
async fn the_probes_headers_override_kubelets_and_host_sets_the_host() {
    let server = http_server().await;
    let Handler::HttpGet(mut get) = http_get(server.port, "/ok") else { unreachable!() };
    get.headers = vec![
        ("Host".into(), "probe.example".into()),
        ("User-Agent".into(), "mine/1".into()),
        ("Accept".into(), "".into()),
        ("X-Check".into(), "a".into()),
        ("X-Check".into(), "b".into()),
    ];
    assert_eq!(probe(&Handler::HttpGet(get)).await, Outcome::Success);
    let headers = server.last_request();
    assert_eq!(headers[header::HOST], "probe.example");
    assert_eq!(headers[header::USER_AGENT], "mine/1");
    // kubelet sends none; reqwest adds `*/*` to a request without one: sent empty.
    assert_eq!(headers[header::ACCEPT], "");
    let checks: Vec<_> = headers.get_all("x-check").iter().collect();
    assert_eq!(checks, ["a", "b"]);
}

#[tokio::test]
async fn an_invalid_header_name_is_a_failure() {
    let Handler::HttpGet(mut get) = http_get(1, "/") else { unreachable!() };
    get.headers = vec![("Bad Name".into(), "x".into())];
    let message = failure(probe(&Handler::HttpGet(get)).await);
    assert!(message.ends_with("invalid header field name \"Bad Name\""), "{message}");
}

#[tokio::test]
async fn https_checks_no_certificate() {
    let server = https_server().await;
    let Handler::HttpGet(mut get) = http_get(server.port, "/ok") else { unreachable!() };
    get.scheme = Scheme::Https;
    assert_eq!(probe(&Handler::HttpGet(get.clone())).await, Outcome::Success);
    get.path = "/error".into();
    let message = failure(probe(&Handler::HttpGet(get)).await);
    assert_eq!(message, "HTTP probe failed with statuscode: 500");
}

#[tokio::test]
async fn no_answer_within_the_timeout_is_a_failure() {
    let server = http_server().await;
    let message =
        failure(probe_within(&http_get(server.port, "/hang"), Duration::from_millis(200)).await);
    assert_eq!(
        message,
        format!(
            "Get \"http://127.0.0.1:{}/hang\": context deadline exceeded \
             (Client.Timeout exceeded while awaiting headers)",
            server.port
        )
    );
}

#[tokio::test]
async fn a_refused_http_connection_is_a_failure_in_gos_words() {
    let port = closed_port().await;
    let message = failure(probe(&http_get(port, "/healthz")).await);
    assert_eq!(
        message,
        format!(
            "Get \"http://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: \
             connection refused"
        )
    );
}

// ---------------------------------------------------------------------------------------
// tcpSocket

#[tokio::test]
async fn tcp_open_is_a_success_and_refused_a_failure() {
    let server = http_server().await;
    let open = Handler::TcpSocket { host: "127.0.0.1".into(), port: server.port };
    assert_eq!(probe(&open).await, Outcome::Success);
    let port = closed_port().await;
    let refused = Handler::TcpSocket { host: "127.0.0.1".into(), port };
    assert_eq!(
        failure(probe(&refused).await),
        format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
    );
}

#[tokio::test]
async fn tcp_to_a_host_name_looks_it_up() {
    let server = http_server().await;
    let open = Handler::TcpSocket { host: "localhost".into(), port: server.port };
    // localhost may resolve to ::1 first, where nothing listens: the next address is tried.
    assert_eq!(probe(&open).await, Outcome::Success);
}

// ---------------------------------------------------------------------------------------
// grpc

/// A gRPC server with the health service: "" and `up` SERVING, `down` NOT_SERVING.
async fn grpc_server() -> Server {
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter.set_service_status("up", tonic_health::ServingStatus::Serving).await;
    reporter.set_service_status("down", tonic_health::ServingStatus::NotServing).await;
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    Server { port, task, requests: Arc::default() }
}

fn grpc(port: u16, service: &str) -> Handler {
    Handler::Grpc { host: "127.0.0.1".into(), port, service: service.into() }
}

#[tokio::test]
async fn grpc_serving_is_a_success() {
    let server = grpc_server().await;
    assert_eq!(probe(&grpc(server.port, "")).await, Outcome::Success);
    assert_eq!(probe(&grpc(server.port, "up")).await, Outcome::Success);
}

#[tokio::test]
async fn grpc_not_serving_is_a_failure() {
    let server = grpc_server().await;
    assert_eq!(
        failure(probe(&grpc(server.port, "down")).await),
        "service unhealthy (responded with \"NOT_SERVING\")"
    );
}

#[tokio::test]
async fn grpc_unknown_service_is_a_failure() {
    let server = grpc_server().await;
    assert_eq!(
        failure(probe(&grpc(server.port, "elsewhere")).await),
        "error: health rpc probe failed: rpc error: code = NotFound desc = service not registered"
    );
}

#[tokio::test]
async fn grpc_refused_is_a_failure() {
    let port = closed_port().await;
    assert_eq!(
        failure(probe(&grpc(port, "")).await),
        format!(
            "error: failed to connect service at \"127.0.0.1:{port}\": dial tcp \
             127.0.0.1:{port}: connect: connection refused"
        )
    );
}

// ---------------------------------------------------------------------------------------
// exec and sleep

/// A runtime whose `exec` answers from a queue; nothing else is asked of it.
#[derive(Debug, Default)]
struct Commands {
    answers: Mutex<VecDeque<Result<ExecOutput, exec::Error>>>,
    asked: Mutex<Vec<(String, Vec<String>, Duration)>>,
}

impl Commands {
    fn answering(answer: Result<ExecOutput, exec::Error>) -> Commands {
        let commands = Commands::default();
        commands.answers.lock().unwrap().push_back(answer);
        commands
    }
}

impl PodRuntime for Commands {
    type Sandbox = ();
    type Image = ();

    async fn set_up_sandbox(&self, _: &Pod) -> Result<SetUp<()>, SandboxProblem> {
        unreachable!("probes set up no sandbox")
    }
    async fn refresh_volumes(&self, _: &Pod) {
        unreachable!("probes write no volumes")
    }
    async fn release_volumes(&self, _: &str) {
        unreachable!()
    }
    async fn tear_down_sandbox(&self, _: &str) {
        unreachable!()
    }
    async fn ensure_image(&self, _: &Pod, _: &Container) -> Result<(), StartFailure> {
        unreachable!()
    }
    async fn create_container(&self, _: NewContainer<'_, (), ()>) -> Result<Created, StartFailure> {
        unreachable!()
    }
    async fn start_container(&self, _: &str) -> Result<(), StartFailure> {
        unreachable!()
    }
    async fn kill(&self, _: &str, _: StopSignal) -> Result<(), container::Error> {
        unreachable!()
    }
    async fn task(&self, _: &str) -> Result<TaskState, container::Error> {
        unreachable!()
    }
    async fn delete_task(&self, _: &str, _: bool) -> Result<(), container::Error> {
        unreachable!()
    }
    async fn record_exit(&self, _: &str, _: &Terminated) -> Result<(), container::Error> {
        unreachable!()
    }
    async fn termination_message(&self, _: &Pod, _: &Container, _: &str, _: i32) -> Option<String> {
        unreachable!()
    }
    async fn remove_container(&self, _: &str) -> Result<(), container::Error> {
        unreachable!()
    }
    async fn exec(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, exec::Error> {
        self.asked.lock().unwrap().push((id.to_owned(), command.to_vec(), timeout));
        self.answers.lock().unwrap().pop_front().expect("an answer for each exec")
    }
    async fn list(&self) -> Result<Vec<(FullName, Found)>, container::Error> {
        unreachable!()
    }
    async fn watch_events(&self, _: impl FnMut(TaskEvent) -> bool + Send) {
        unreachable!()
    }
    async fn remove_orphans(&self, _: &HashSet<String>) {
        unreachable!()
    }

    async fn resize(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
        _actual: &k8s_openapi::api::core::v1::Pod,
        _containers: &[outpost_core::pod_worker::ResizeContainer],
    ) -> (Vec<(String, k8s_openapi::api::core::v1::ResourceRequirements)>, Option<String>) {
        unreachable!()
    }
}

fn cat_healthy() -> Handler {
    Handler::Exec { command: vec!["cat".into(), "/tmp/healthy".into()] }
}

async fn exec_probe(answer: Result<ExecOutput, exec::Error>) -> (Outcome, Commands) {
    let runtime = Commands::answering(answer);
    let outcome = Prober::new().unwrap().run(&runtime, "c1", &cat_healthy(), TIMEOUT).await;
    (outcome, runtime)
}

#[tokio::test]
async fn exec_exit_zero_is_a_success() {
    let (outcome, runtime) =
        exec_probe(Ok(ExecOutput { exit_code: 0, output: b"fine\n".to_vec() })).await;
    assert_eq!(outcome, Outcome::Success);
    let asked = runtime.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [("c1".to_owned(), vec!["cat".to_owned(), "/tmp/healthy".to_owned()], TIMEOUT)]
    );
}

#[tokio::test]
async fn exec_exit_nonzero_is_a_failure_with_its_output() {
    let output = b"cat: can't open '/tmp/healthy': No such file or directory\n".to_vec();
    let (outcome, _) = exec_probe(Ok(ExecOutput { exit_code: 1, output })).await;
    assert_eq!(failure(outcome), "cat: can't open '/tmp/healthy': No such file or directory");
}

#[tokio::test]
async fn exec_timed_out_is_a_failure_in_kubelets_words() {
    let (outcome, _) =
        exec_probe(Err(exec::Error::TimedOut { id: "c1".into(), timeout: TIMEOUT })).await;
    assert_eq!(failure(outcome), "command \"cat /tmp/healthy\" timed out");
}

#[tokio::test]
async fn exec_that_cannot_run_is_a_failure_with_the_error() {
    let error = exec::Error::Containerd {
        id: "c1".into(),
        step: "cannot start the process",
        source: tonic::Status::not_found("container c1 not found"),
    };
    let (outcome, _) = exec_probe(Err(error)).await;
    let message = failure(outcome);
    assert!(message.starts_with("container c1: cannot start the process: "), "{message}");
    assert!(message.contains("container c1 not found"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn sleep_waits_then_succeeds_or_is_cut_short_at_the_timeout() {
    let hook = Handler::Sleep(Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    assert_eq!(probe_within(&hook, Duration::from_secs(30)).await, Outcome::Success);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    let message = failure(probe_within(&hook, Duration::from_secs(2)).await);
    assert_eq!(message, "container terminated before sleep hook finished");
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

// ---------------------------------------------------------------------------------------
// Wording

#[test]
fn durations_read_as_in_go() {
    assert_eq!(go_duration(Duration::from_secs(1)), "1s");
    assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
    assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
}

#[test]
fn addresses_bracket_ipv6() {
    assert_eq!(join_host_port("10.0.0.7", 80), "10.0.0.7:80");
    assert_eq!(join_host_port("fd00::7", 80), "[fd00::7]:80");
    let _: SocketAddr = join_host_port("fd00::7", 80).parse().unwrap();
}
