//! The pure prober: handlers resolved against their container and pod (P5), the API's
//! defaults, what validation refuses (A1), and each container's schedule and thresholds
//! (P1–P4, in `tests/schedule.rs`).

mod schedule;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, Lifecycle,
    LifecycleHandler, Probe, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn pod_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))
}

fn node_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10))
}

/// A pod with its own address on a node with one.
fn target() -> Target {
    Target { pod_ip: Some(pod_ip()), host_ip: Some(node_ip()) }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort { name: Some(name.into()), container_port: number, ..ContainerPort::default() }
}

/// Container `web`, ports `http` (8080) and `metrics` (9090).
fn web() -> Container {
    Container {
        name: "web".into(),
        image: Some("img:1".into()),
        ports: Some(vec![port("http", 8080), port("metrics", 9090)]),
        ..Container::default()
    }
}

fn exec_action(command: &[&str]) -> ExecAction {
    ExecAction { command: Some(command.iter().map(|s| (*s).to_owned()).collect()) }
}

fn http_action(port: IntOrString, path: Option<&str>) -> HTTPGetAction {
    HTTPGetAction { port, path: path.map(str::to_owned), ..HTTPGetAction::default() }
}

fn tcp_action(port: IntOrString) -> TCPSocketAction {
    TCPSocketAction { port, host: None }
}

fn grpc_action(port: i32, service: Option<&str>) -> GRPCAction {
    GRPCAction { port, service: service.map(str::to_owned), mode: None }
}

fn exec_probe(command: &[&str]) -> Probe {
    Probe { exec: Some(exec_action(command)), ..Probe::default() }
}

fn http_probe(action: HTTPGetAction) -> Probe {
    Probe { http_get: Some(action), ..Probe::default() }
}

fn tcp_probe(port: IntOrString) -> Probe {
    Probe { tcp_socket: Some(tcp_action(port)), ..Probe::default() }
}

fn grpc_probe(action: GRPCAction) -> Probe {
    Probe { grpc: Some(action), ..Probe::default() }
}

fn named(name: &str) -> IntOrString {
    IntOrString::String(name.into())
}

/// The `httpGet` a probe resolves to.
fn resolved_http(action: HTTPGetAction, target: Target) -> HttpGet {
    match probe_handler(&http_probe(action), &web(), target) {
        Ok(Handler::HttpGet(get)) => get,
        other => panic!("not an httpGet: {other:?}"),
    }
}

fn error(result: Result<Handler, Error>) -> String {
    result.expect_err("the handler cannot run").to_string()
}

// ---------------------------------------------------------------------------------------
// Ports

#[test]
fn named_ports_resolve_to_the_containers_port_numbers() {
    let c = web();
    let http = http_probe(http_action(named("http"), None));
    let Ok(Handler::HttpGet(get)) = probe_handler(&http, &c, target()) else { panic!() };
    assert_eq!(get.port, 8080);
    assert_eq!(
        probe_handler(&tcp_probe(named("metrics")), &c, target()),
        Ok(Handler::TcpSocket { host: "10.0.0.7".into(), port: 9090 })
    );
    // A name that is a number is the number (IntOrString as the API decodes "8081").
    assert_eq!(
        probe_handler(&tcp_probe(named("8081")), &c, target()),
        Ok(Handler::TcpSocket { host: "10.0.0.7".into(), port: 8081 })
    );
    // Numbers need no declared port.
    assert_eq!(
        probe_handler(&tcp_probe(IntOrString::Int(65535)), &c, target()),
        Ok(Handler::TcpSocket { host: "10.0.0.7".into(), port: 65535 })
    );
}

#[test]
fn a_port_name_the_container_lacks_is_an_error_naming_the_container() {
    let message = error(probe_handler(&tcp_probe(named("admin")), &web(), target()));
    assert_eq!(message, "port \"admin\" is not the name of one of container web's ports");
    // A container with no ports at all.
    let bare = Container { name: "bare".into(), ..Container::default() };
    let message = error(probe_handler(&tcp_probe(named("http")), &bare, target()));
    assert_eq!(message, "port \"http\" is not the name of one of container bare's ports");
    // Hooks resolve named ports the same way.
    let hook = LifecycleHandler {
        http_get: Some(http_action(named("admin"), None)),
        ..LifecycleHandler::default()
    };
    assert!(error(hook_handler(&hook, &web(), target())).contains("\"admin\""));
}

#[test]
fn port_numbers_out_of_range_are_errors() {
    for n in [0, -1, 65536, i32::MAX] {
        let message = error(probe_handler(&tcp_probe(IntOrString::Int(n)), &web(), target()));
        assert_eq!(message, format!("port {n} is not a port number (1-65535)"));
        // Also as a string that is a number.
        let message = error(probe_handler(&tcp_probe(named(&n.to_string())), &web(), target()));
        assert_eq!(message, format!("port {n} is not a port number (1-65535)"), "{n:?}");
    }
}

// ---------------------------------------------------------------------------------------
// httpGet

#[test]
fn http_get_defaults_to_http_the_root_path_and_the_pod_ip() {
    let get = resolved_http(http_action(IntOrString::Int(8080), None), target());
    assert_eq!(
        get,
        HttpGet {
            scheme: Scheme::Http,
            host: "10.0.0.7".into(),
            port: 8080,
            path: "/".into(),
            headers: Vec::new(),
        }
    );
    assert_eq!(get.url(), "http://10.0.0.7:8080/");
}

#[test]
fn http_get_path_gets_a_leading_slash_and_keeps_its_query() {
    for (path, expected) in [
        (Some(""), "/"),
        (Some("/healthz"), "/healthz"),
        (Some("healthz"), "/healthz"),
        (Some("healthz?verbose=1&x=%2F"), "/healthz?verbose=1&x=%2F"),
        (Some("/a/b/"), "/a/b/"),
    ] {
        let get = resolved_http(http_action(named("http"), path), target());
        assert_eq!(get.path, expected, "{path:?}");
        assert_eq!(get.url(), format!("http://10.0.0.7:8080{expected}"));
    }
}

#[test]
fn http_get_schemes() {
    let https = HTTPGetAction {
        scheme: Some("HTTPS".into()),
        ..http_action(IntOrString::Int(8443), Some("/ready"))
    };
    let get = resolved_http(https, target());
    assert_eq!(get.scheme, Scheme::Https);
    assert_eq!(get.url(), "https://10.0.0.7:8443/ready");
    let http = HTTPGetAction { scheme: Some("HTTP".into()), ..http_action(named("http"), None) };
    assert_eq!(resolved_http(http, target()).scheme, Scheme::Http);
    let ftp = HTTPGetAction { scheme: Some("FTP".into()), ..http_action(named("http"), None) };
    assert_eq!(
        error(probe_handler(&http_probe(ftp), &web(), target())),
        "httpGet.scheme \"FTP\": use HTTP or HTTPS"
    );
}

#[test]
fn http_get_keeps_its_host_and_headers_in_order() {
    let action = HTTPGetAction {
        host: Some("health.example".into()),
        http_headers: Some(vec![
            HTTPHeader { name: "Host".into(), value: "web.example".into() },
            HTTPHeader { name: "X-Probe".into(), value: "1".into() },
            HTTPHeader { name: "X-Probe".into(), value: "2".into() },
        ]),
        ..http_action(named("http"), Some("/healthz"))
    };
    let get = resolved_http(action, target());
    assert_eq!(get.host, "health.example");
    assert_eq!(
        get.headers,
        [
            ("Host".to_owned(), "web.example".to_owned()),
            ("X-Probe".to_owned(), "1".to_owned()),
            ("X-Probe".to_owned(), "2".to_owned()),
        ]
    );
    assert_eq!(get.url(), "http://health.example:8080/healthz");
    // An empty host is no host: the pod's IP.
    let empty = HTTPGetAction { host: Some(String::new()), ..http_action(named("http"), None) };
    assert_eq!(resolved_http(empty, target()).host, "10.0.0.7");
}

#[test]
fn ipv6_hosts_are_bracketed_in_the_url() {
    let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7));
    let target = Target { pod_ip: Some(v6), host_ip: Some(node_ip()) };
    let get = resolved_http(http_action(named("http"), Some("healthz")), target);
    assert_eq!(get.host, "fd00::7", "the host itself is bare");
    assert_eq!(get.url(), "http://[fd00::7]:8080/healthz");
    let explicit =
        HTTPGetAction { host: Some("::1".into()), ..http_action(IntOrString::Int(80), None) };
    assert_eq!(resolved_http(explicit, target).url(), "http://[::1]:80/");
    // Names and IPv4 addresses are not bracketed.
    let name =
        HTTPGetAction { host: Some("localhost".into()), ..http_action(IntOrString::Int(80), None) };
    assert_eq!(resolved_http(name, target).url(), "http://localhost:80/");
}

#[test]
fn http_protocols_other_than_http_1_1_cannot_run() {
    let h2 = HTTPGetAction { protocol: Some("HTTP/2".into()), ..http_action(named("http"), None) };
    assert_eq!(
        error(probe_handler(&http_probe(h2), &web(), target())),
        "httpGet.protocol \"HTTP/2\" is not supported by Outpost; leave it unset (HTTP/1.1)"
    );
    let h1 =
        HTTPGetAction { protocol: Some("HTTP/1.1".into()), ..http_action(named("http"), None) };
    assert_eq!(resolved_http(h1, target()).port, 8080);
}

// ---------------------------------------------------------------------------------------
// Hosts, tcpSocket, grpc, exec

#[test]
fn the_default_host_is_the_pod_ip_then_the_node_ip_then_localhost() {
    let cases = [
        (target(), "10.0.0.7"),
        // A hostNetwork pod has no IP of its own.
        (Target { pod_ip: None, host_ip: Some(node_ip()) }, "192.168.1.10"),
        (Target { pod_ip: None, host_ip: None }, "127.0.0.1"),
    ];
    for (target, host) in cases {
        assert_eq!(resolved_http(http_action(named("http"), None), target).host, host);
        assert_eq!(
            probe_handler(&tcp_probe(named("http")), &web(), target),
            Ok(Handler::TcpSocket { host: host.into(), port: 8080 })
        );
        assert_eq!(
            probe_handler(&grpc_probe(grpc_action(2379, None)), &web(), target),
            Ok(Handler::Grpc { host: host.into(), port: 2379, service: String::new() })
        );
    }
}

#[test]
fn tcp_socket_keeps_its_host() {
    let probe = Probe {
        tcp_socket: Some(TCPSocketAction {
            host: Some("db.local".into()),
            port: IntOrString::Int(5432),
        }),
        ..Probe::default()
    };
    assert_eq!(
        probe_handler(&probe, &web(), target()),
        Ok(Handler::TcpSocket { host: "db.local".into(), port: 5432 })
    );
}

#[test]
fn grpc_takes_its_port_and_service_and_plaintext_only() {
    assert_eq!(
        probe_handler(&grpc_probe(grpc_action(2379, Some("liveness"))), &web(), target()),
        Ok(Handler::Grpc { host: "10.0.0.7".into(), port: 2379, service: "liveness".into() })
    );
    let plaintext = GRPCAction { mode: Some("Plaintext".into()), ..grpc_action(50051, None) };
    assert!(probe_handler(&grpc_probe(plaintext), &web(), target()).is_ok());
    let tls = GRPCAction { mode: Some("TLS".into()), ..grpc_action(50051, None) };
    assert_eq!(
        error(probe_handler(&grpc_probe(tls), &web(), target())),
        "grpc.mode \"TLS\" is not supported by Outpost; leave it unset or Plaintext"
    );
    for port in [0, -1, 65536] {
        assert_eq!(
            error(probe_handler(&grpc_probe(grpc_action(port, None)), &web(), target())),
            format!("grpc.port {port} is not a port number")
        );
    }
}

#[test]
fn exec_needs_a_command() {
    assert_eq!(
        probe_handler(&exec_probe(&["cat", "/tmp/healthy"]), &web(), target()),
        Ok(Handler::Exec { command: vec!["cat".into(), "/tmp/healthy".into()] })
    );
    assert_eq!(error(probe_handler(&exec_probe(&[]), &web(), target())), "exec.command is empty");
    let none = Probe { exec: Some(ExecAction { command: None }), ..Probe::default() };
    assert_eq!(error(probe_handler(&none, &web(), target())), "exec.command is empty");
}

#[test]
fn a_probe_has_exactly_one_handler() {
    assert_eq!(
        error(probe_handler(&Probe::default(), &web(), target())),
        "no handler: set exactly one of exec, httpGet, tcpSocket, grpc or sleep"
    );
    let two = Probe { tcp_socket: Some(tcp_action(named("http"))), ..exec_probe(&["true"]) };
    assert_eq!(
        error(probe_handler(&two, &web(), target())),
        "more than one handler: set exactly one"
    );
    // Even when one of the two could not run on its own.
    let two = Probe { tcp_socket: Some(tcp_action(named("nope"))), ..exec_probe(&["true"]) };
    assert_eq!(
        error(probe_handler(&two, &web(), target())),
        "more than one handler: set exactly one"
    );
}

// ---------------------------------------------------------------------------------------
// Hooks

fn sleep_hook(seconds: i64) -> LifecycleHandler {
    LifecycleHandler { sleep: Some(SleepAction { seconds }), ..LifecycleHandler::default() }
}

#[test]
fn hooks_resolve_like_probes_and_may_sleep() {
    let exec = LifecycleHandler { exec: Some(exec_action(&["drain"])), ..Default::default() };
    assert_eq!(
        hook_handler(&exec, &web(), target()),
        Ok(Handler::Exec { command: vec!["drain".into()] })
    );
    let http = LifecycleHandler {
        http_get: Some(http_action(named("metrics"), Some("quit"))),
        ..Default::default()
    };
    let Ok(Handler::HttpGet(get)) = hook_handler(&http, &web(), target()) else { panic!() };
    assert_eq!(get.url(), "http://10.0.0.7:9090/quit");
    assert_eq!(hook_handler(&sleep_hook(5), &web(), target()), Ok(Handler::Sleep(secs(5))));
    assert_eq!(hook_handler(&sleep_hook(0), &web(), target()), Ok(Handler::Sleep(Duration::ZERO)));
    assert_eq!(
        error(hook_handler(&sleep_hook(-1), &web(), target())),
        "sleep.seconds -1 is negative"
    );
    assert!(
        error(hook_handler(&LifecycleHandler::default(), &web(), target())).contains("no handler")
    );
    let two = LifecycleHandler { sleep: Some(SleepAction { seconds: 1 }), ..exec };
    assert!(error(hook_handler(&two, &web(), target())).contains("more than one handler"));
}

#[test]
fn a_tcp_socket_hook_cannot_run() {
    // kubelet's handler runner knows exec, httpGet and sleep; a tcpSocket hook fails at
    // runtime (a postStart kills the container) and the API documents it so; check()
    // refuses it (A1).
    let tcp =
        LifecycleHandler { tcp_socket: Some(tcp_action(named("http"))), ..Default::default() };
    assert!(hook_handler(&tcp, &web(), target()).is_err());
}

#[test]
fn hooks_and_probes_are_found_on_their_container() {
    let mut c = web();
    assert!(Hook::PostStart.of(&c).is_none() && Hook::PreStop.of(&c).is_none());
    c.lifecycle = Some(Lifecycle { pre_stop: Some(sleep_hook(3)), ..Lifecycle::default() });
    assert!(Hook::PostStart.of(&c).is_none());
    assert_eq!(Hook::PreStop.of(&c), Some(&sleep_hook(3)));
    c.readiness_probe = Some(exec_probe(&["ready"]));
    assert_eq!(ProbeKind::Readiness.of(&c), Some(&exec_probe(&["ready"])));
    assert!(ProbeKind::Liveness.of(&c).is_none() && ProbeKind::Startup.of(&c).is_none());
    assert_eq!(
        ProbeKind::ALL.map(ProbeKind::as_str),
        ["Startup", "Liveness", "Readiness"],
        "as kubelet's events name them"
    );
    assert_eq!((Hook::PostStart.as_str(), Hook::PreStop.as_str()), ("PostStart", "PreStop"));
}

#[test]
fn handlers_are_described_as_kubelet_describes_them() {
    let get = HttpGet {
        scheme: Scheme::Https,
        host: "10.0.0.7".into(),
        port: 8443,
        path: "/healthz".into(),
        headers: Vec::new(),
    };
    let cases = [
        (
            Handler::Exec { command: vec!["cat".into(), "/tmp/healthy".into()] },
            "exec [cat /tmp/healthy]",
        ),
        (Handler::HttpGet(get), "http-get https://10.0.0.7:8443/healthz"),
        (Handler::TcpSocket { host: "10.0.0.7".into(), port: 8080 }, "tcp-socket 10.0.0.7:8080"),
        (
            Handler::Grpc { host: "10.0.0.7".into(), port: 2379, service: "liveness".into() },
            "grpc 10.0.0.7:2379 liveness",
        ),
        (Handler::Sleep(secs(5)), "sleep 5s"),
    ];
    for (handler, text) in cases {
        assert_eq!(handler.describe(), text);
    }
}

#[test]
fn outcomes_count_warnings_as_successes() {
    assert!(Outcome::Success.is_success());
    assert!(Outcome::Warning("redirected to another host".into()).is_success());
    assert!(!Outcome::Failure("HTTP probe failed with statuscode: 500".into()).is_success());
    assert_eq!(Outcome::Success.metric_label(), "successful");
    assert_eq!(Outcome::Warning(String::new()).metric_label(), "successful");
    assert_eq!(Outcome::Failure(String::new()).metric_label(), "failed");
}

// ---------------------------------------------------------------------------------------
// A probe's settings

fn with_probe(kind: ProbeKind, probe: Probe) -> Container {
    let mut c = web();
    match kind {
        ProbeKind::Startup => c.startup_probe = Some(probe),
        ProbeKind::Liveness => c.liveness_probe = Some(probe),
        ProbeKind::Readiness => c.readiness_probe = Some(probe),
    }
    c
}

fn spec(kind: ProbeKind, probe: Probe) -> ProbeSpec {
    ProbeSpec::of(kind, &with_probe(kind, probe), target()).unwrap().unwrap()
}

#[test]
fn a_probe_has_the_apis_defaults() {
    for kind in ProbeKind::ALL {
        assert_eq!(
            spec(kind, exec_probe(&["check"])),
            ProbeSpec {
                kind,
                handler: Handler::Exec { command: vec!["check".into()] },
                initial_delay: Duration::ZERO,
                period: secs(10),
                timeout: secs(1),
                success_threshold: 1,
                failure_threshold: 3,
                grace: None,
            },
            "{kind:?}"
        );
    }
}

#[test]
fn a_probe_keeps_what_is_set() {
    let probe = Probe {
        initial_delay_seconds: Some(15),
        period_seconds: Some(5),
        timeout_seconds: Some(3),
        success_threshold: Some(2),
        failure_threshold: Some(6),
        ..tcp_probe(named("http"))
    };
    let s = spec(ProbeKind::Readiness, probe);
    assert_eq!(s.handler, Handler::TcpSocket { host: "10.0.0.7".into(), port: 8080 });
    assert_eq!(
        (s.initial_delay, s.period, s.timeout, s.success_threshold, s.failure_threshold),
        (secs(15), secs(5), secs(3), 2, 6)
    );
}

#[test]
fn values_the_api_would_refuse_fall_back_to_defaults() {
    // check() refuses these; a probe that gets here anyway runs sanely.
    let probe = Probe {
        initial_delay_seconds: Some(-5),
        period_seconds: Some(0),
        timeout_seconds: Some(-1),
        success_threshold: Some(0),
        failure_threshold: Some(-2),
        ..exec_probe(&["check"])
    };
    let s = spec(ProbeKind::Readiness, probe);
    assert_eq!(
        (s.initial_delay, s.period, s.timeout, s.success_threshold, s.failure_threshold),
        (Duration::ZERO, secs(1), secs(1), 1, 3),
        "a zero period would spin: at least a second"
    );
    let s = spec(
        ProbeKind::Liveness,
        Probe { period_seconds: Some(-3), timeout_seconds: Some(0), ..exec_probe(&["check"]) },
    );
    assert_eq!((s.period, s.timeout), (secs(10), secs(1)));
}

#[test]
fn liveness_and_startup_succeed_after_one_success() {
    let probe = Probe { success_threshold: Some(3), ..exec_probe(&["check"]) };
    assert_eq!(spec(ProbeKind::Liveness, probe.clone()).success_threshold, 1);
    assert_eq!(spec(ProbeKind::Startup, probe.clone()).success_threshold, 1);
    assert_eq!(spec(ProbeKind::Readiness, probe).success_threshold, 3);
}

#[test]
fn a_probes_own_grace_period_is_for_liveness_and_startup() {
    let probe = Probe { termination_grace_period_seconds: Some(5), ..exec_probe(&["check"]) };
    assert_eq!(spec(ProbeKind::Liveness, probe.clone()).grace, Some(secs(5)));
    assert_eq!(spec(ProbeKind::Startup, probe.clone()).grace, Some(secs(5)));
    assert_eq!(spec(ProbeKind::Readiness, probe).grace, None);
    let zero = Probe { termination_grace_period_seconds: Some(0), ..exec_probe(&["check"]) };
    assert_eq!(spec(ProbeKind::Liveness, zero).grace, Some(Duration::ZERO));
    let negative = Probe { termination_grace_period_seconds: Some(-1), ..exec_probe(&["check"]) };
    assert_eq!(spec(ProbeKind::Liveness, negative).grace, None);
}

#[test]
fn a_probe_spec_is_none_without_the_probe_and_an_error_when_it_cannot_run() {
    let c = with_probe(ProbeKind::Liveness, tcp_probe(named("admin")));
    assert_eq!(ProbeSpec::of(ProbeKind::Readiness, &c, target()), None);
    assert_eq!(ProbeSpec::of(ProbeKind::Startup, &c, target()), None);
    let Some(Err(error)) = ProbeSpec::of(ProbeKind::Liveness, &c, target()) else { panic!() };
    let message = error.to_string();
    assert!(message.contains("\"admin\""), "{message}");
}

// ---------------------------------------------------------------------------------------
// Validation (A1)

const AT: &str = "spec.containers[0]";

fn problems(c: &Container) -> Vec<(String, String)> {
    check(AT, c)
}

fn fields(c: &Container) -> Vec<String> {
    problems(c).into_iter().map(|(field, _)| field).collect()
}

/// Every probe and hook, each of a different handler.
fn fully_probed() -> Container {
    Container {
        startup_probe: Some(Probe {
            failure_threshold: Some(30),
            period_seconds: Some(1),
            ..tcp_probe(named("http"))
        }),
        liveness_probe: Some(Probe {
            termination_grace_period_seconds: Some(5),
            ..grpc_probe(grpc_action(9090, Some("live")))
        }),
        readiness_probe: Some(Probe {
            success_threshold: Some(2),
            initial_delay_seconds: Some(0),
            ..http_probe(HTTPGetAction {
                protocol: Some("HTTP/1.1".into()),
                ..http_action(named("http"), Some("/ready"))
            })
        }),
        lifecycle: Some(Lifecycle {
            post_start: Some(LifecycleHandler {
                exec: Some(exec_action(&["warm-up"])),
                ..Default::default()
            }),
            pre_stop: Some(sleep_hook(5)),
            stop_signal: None,
        }),
        ..web()
    }
}

#[test]
fn check_accepts_what_can_run() {
    assert_eq!(problems(&web()), []);
    assert_eq!(problems(&fully_probed()), []);
}

#[test]
fn check_refuses_an_http_protocol_other_than_http_1_1() {
    let mut c = web();
    c.liveness_probe = Some(http_probe(HTTPGetAction {
        protocol: Some("HTTP/2".into()),
        ..http_action(named("http"), None)
    }));
    assert_eq!(
        problems(&c),
        [(
            "spec.containers[0].livenessProbe".to_owned(),
            "httpGet.protocol \"HTTP/2\" is not supported by Outpost; leave it unset (HTTP/1.1)"
                .to_owned()
        )]
    );
}

#[test]
fn check_refuses_grpc_over_tls() {
    let mut c = web();
    c.readiness_probe =
        Some(grpc_probe(GRPCAction { mode: Some("TLS".into()), ..grpc_action(9090, None) }));
    assert_eq!(
        problems(&c),
        [(
            "spec.containers[0].readinessProbe".to_owned(),
            "grpc.mode \"TLS\" is not supported by Outpost; leave it unset or Plaintext".to_owned()
        )]
    );
}

#[test]
fn check_refuses_a_stop_signal() {
    let mut c = fully_probed();
    c.lifecycle.as_mut().unwrap().stop_signal = Some("SIGUSR1".into());
    assert_eq!(
        problems(&c),
        [(
            "spec.containers[0].lifecycle.stopSignal".to_owned(),
            "\"SIGUSR1\": Outpost stops containers with SIGTERM only; remove stopSignal".to_owned()
        )]
    );
    // Even with no hooks.
    let mut c = web();
    c.lifecycle = Some(Lifecycle { stop_signal: Some("SIGTERM".into()), ..Lifecycle::default() });
    assert_eq!(fields(&c), ["spec.containers[0].lifecycle.stopSignal"]);
}

#[test]
fn check_refuses_probes_without_exactly_one_runnable_handler() {
    let mut c = web();
    c.startup_probe = Some(Probe::default());
    c.liveness_probe =
        Some(Probe { http_get: Some(http_action(named("http"), None)), ..exec_probe(&["true"]) });
    c.readiness_probe = Some(tcp_probe(named("admin")));
    let p = problems(&c);
    assert_eq!(
        p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
        [
            "spec.containers[0].startupProbe",
            "spec.containers[0].livenessProbe",
            "spec.containers[0].readinessProbe",
        ]
    );
    assert!(p[0].1.starts_with("no handler"), "{p:?}");
    assert!(p[1].1.starts_with("more than one handler"), "{p:?}");
    assert!(p[2].1.contains("\"admin\""), "{p:?}");
    let mut c = web();
    c.liveness_probe = Some(exec_probe(&[]));
    assert_eq!(
        problems(&c),
        [("spec.containers[0].livenessProbe".to_owned(), "exec.command is empty".to_owned())]
    );
}

#[test]
fn check_refuses_hooks_that_cannot_run() {
    let mut c = web();
    c.lifecycle = Some(Lifecycle {
        post_start: Some(LifecycleHandler {
            http_get: Some(http_action(named("admin"), None)),
            ..Default::default()
        }),
        pre_stop: Some(sleep_hook(-3)),
        stop_signal: None,
    });
    let p = problems(&c);
    assert_eq!(
        p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
        ["spec.containers[0].lifecycle.postStart", "spec.containers[0].lifecycle.preStop"]
    );
    assert_eq!(p[1].1, "sleep.seconds -3 is negative");
    let mut c = web();
    c.lifecycle =
        Some(Lifecycle { pre_stop: Some(LifecycleHandler::default()), ..Lifecycle::default() });
    assert_eq!(fields(&c), ["spec.containers[0].lifecycle.preStop"]);
}

#[test]
fn check_refuses_a_success_threshold_other_than_one_for_liveness_and_startup() {
    for (kind, field) in
        [(ProbeKind::Liveness, "livenessProbe"), (ProbeKind::Startup, "startupProbe")]
    {
        let c = with_probe(kind, Probe { success_threshold: Some(2), ..exec_probe(&["check"]) });
        assert_eq!(
            problems(&c),
            [(
                format!("spec.containers[0].{field}.successThreshold"),
                "must be 1 for liveness and startup probes".to_owned()
            )]
        );
        let one = with_probe(kind, Probe { success_threshold: Some(1), ..exec_probe(&["check"]) });
        assert_eq!(problems(&one), []);
    }
    let c = with_probe(
        ProbeKind::Readiness,
        Probe { success_threshold: Some(2), ..exec_probe(&["check"]) },
    );
    assert_eq!(problems(&c), []);
}

#[test]
fn check_refuses_counts_and_periods_below_one_and_negative_delays() {
    let bad = Probe {
        initial_delay_seconds: Some(-1),
        period_seconds: Some(0),
        timeout_seconds: Some(0),
        success_threshold: Some(0),
        failure_threshold: Some(-1),
        ..exec_probe(&["check"])
    };
    let c = with_probe(ProbeKind::Readiness, bad.clone());
    assert_eq!(
        problems(&c),
        [
            ("spec.containers[0].readinessProbe.periodSeconds", "must be at least 1"),
            ("spec.containers[0].readinessProbe.timeoutSeconds", "must be at least 1"),
            ("spec.containers[0].readinessProbe.successThreshold", "must be at least 1"),
            ("spec.containers[0].readinessProbe.failureThreshold", "must be at least 1"),
            ("spec.containers[0].readinessProbe.initialDelaySeconds", "must not be negative"),
        ]
        .map(|(f, m)| (f.to_owned(), m.to_owned()))
    );
    // Liveness: a successThreshold of 0 is both not 1 and below 1.
    let c = with_probe(ProbeKind::Liveness, bad);
    assert_eq!(
        fields(&c),
        [
            "spec.containers[0].livenessProbe.successThreshold",
            "spec.containers[0].livenessProbe.periodSeconds",
            "spec.containers[0].livenessProbe.timeoutSeconds",
            "spec.containers[0].livenessProbe.successThreshold",
            "spec.containers[0].livenessProbe.failureThreshold",
            "spec.containers[0].livenessProbe.initialDelaySeconds",
        ]
    );
}

#[test]
fn check_names_the_field_under_the_path_it_is_given() {
    let c = with_probe(ProbeKind::Startup, tcp_probe(IntOrString::Int(0)));
    assert_eq!(
        check("spec.initContainers[2]", &c),
        [(
            "spec.initContainers[2].startupProbe".to_owned(),
            "port 0 is not a port number (1-65535)".to_owned()
        )]
    );
}
