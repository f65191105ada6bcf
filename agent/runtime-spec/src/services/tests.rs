use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

use super::*;

fn port(name: Option<&str>, port: i32, protocol: Option<&str>) -> ServicePort {
    ServicePort {
        name: name.map(str::to_owned),
        port,
        protocol: protocol.map(str::to_owned),
        ..ServicePort::default()
    }
}

fn service(namespace: &str, name: &str, ip: Option<&str>, ports: Vec<ServicePort>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: ip.map(str::to_owned),
            ports: Some(ports),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn kubernetes(ip: &str) -> Service {
    service("default", "kubernetes", Some(ip), vec![port(Some("https"), 443, Some("TCP"))])
}

fn pairs(env: &ServiceEnv) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn k1_the_kubernetes_service_as_kubelet_names_it() {
    let env = service_env("app", true, [&kubernetes("10.96.0.1")]);
    assert_eq!(
        pairs(&env),
        [
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
        ]
    );
}

#[test]
fn k1_named_ports_dashes_protocols_and_the_first_port() {
    let ports = vec![
        port(None, 80, None),
        port(Some("dns-udp"), 53, Some("UDP")),
        port(Some("sctp-x"), 9, Some("SCTP")),
    ];
    let env = service_env("app", true, [&service("app", "my-svc", Some("10.0.0.7"), ports)]);
    let get = |k: &str| env.get(k).map(String::as_str);
    assert_eq!(get("MY_SVC_SERVICE_HOST"), Some("10.0.0.7"));
    assert_eq!(get("MY_SVC_SERVICE_PORT"), Some("80"));
    assert_eq!(get("MY_SVC_SERVICE_PORT_DNS_UDP"), Some("53"));
    assert_eq!(get("MY_SVC_SERVICE_PORT_SCTP_X"), Some("9"));
    assert_eq!(get("MY_SVC_PORT"), Some("tcp://10.0.0.7:80"));
    assert_eq!(get("MY_SVC_PORT_53_UDP"), Some("udp://10.0.0.7:53"));
    assert_eq!(get("MY_SVC_PORT_53_UDP_PROTO"), Some("udp"));
    assert_eq!(get("MY_SVC_PORT_9_SCTP"), Some("sctp://10.0.0.7:9"));
    assert_eq!(get("MY_SVC_PORT_80_TCP_PORT"), Some("80"));
    assert_eq!(get("MY_SVC_PORT_80_TCP_ADDR"), Some("10.0.0.7"));
    // 2 service + 2 named + 1 first link + 3 ports × 4.
    assert_eq!(env.len(), 17);
}

#[test]
fn k1_ipv6_hosts_are_bracketed() {
    let env = service_env("app", true, [&kubernetes("fd00::1")]);
    assert_eq!(env["KUBERNETES_PORT"], "tcp://[fd00::1]:443");
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "fd00::1");
    assert_eq!(env["KUBERNETES_PORT_443_TCP_ADDR"], "fd00::1");
}

#[test]
fn k1_headless_and_external_name_services_give_nothing() {
    let headless = service("app", "db", Some("None"), vec![port(None, 5432, None)]);
    let external = service("app", "ext", None, vec![]);
    let empty = service("app", "empty", Some(""), vec![port(None, 1, None)]);
    assert!(service_env("app", true, [&headless, &external, &empty]).is_empty());
    assert!(variables(&headless).is_empty());
}

#[test]
fn k1_service_links_choose_the_pod_namespace_only() {
    let kube = kubernetes("10.96.0.1");
    let mine = service("app", "web", Some("10.0.0.2"), vec![port(None, 80, None)]);
    let other = service("other", "db", Some("10.0.0.3"), vec![port(None, 5432, None)]);
    let default_other = service("default", "web2", Some("10.0.0.4"), vec![port(None, 80, None)]);
    let all = [&kube, &mine, &other, &default_other];
    let env = service_env("app", true, all);
    assert!(env.contains_key("WEB_SERVICE_HOST"));
    assert!(env.contains_key("KUBERNETES_SERVICE_HOST"));
    assert!(!env.contains_key("DB_SERVICE_HOST"));
    assert!(!env.contains_key("WEB2_SERVICE_HOST"));
    // Without service links, the kubernetes Service only.
    let env = service_env("app", false, all);
    assert!(env.keys().all(|k| k.starts_with("KUBERNETES_")), "{env:?}");
    assert_eq!(env.len(), 8);
    // A pod of `default` with links gets default's Services.
    assert!(service_env("default", true, all).contains_key("WEB2_SERVICE_HOST"));
}

#[test]
fn k1_a_kubernetes_service_of_the_pod_namespace_wins() {
    let master = kubernetes("10.96.0.1");
    let own = service("app", "kubernetes", Some("10.0.0.9"), vec![port(None, 8443, None)]);
    for order in [[&master, &own], [&own, &master]] {
        let env = service_env("app", true, order);
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.0.0.9");
        assert_eq!(env["KUBERNETES_SERVICE_PORT"], "8443");
        assert!(!env.contains_key("KUBERNETES_SERVICE_PORT_HTTPS"));
    }
    // Without links the pod's namespace does not count.
    assert_eq!(service_env("app", false, [&own, &master])["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
}

#[test]
fn k1_a_service_without_ports_has_its_host_only() {
    let env = service_env("app", true, [&service("app", "x", Some("10.0.0.1"), vec![])]);
    assert_eq!(pairs(&env), [("X_SERVICE_HOST", "10.0.0.1")]);
}

fn arb_service() -> impl Strategy<Value = Service> {
    let ip = prop_oneof![
        Just(None),
        Just(Some("".to_owned())),
        Just(Some("None".to_owned())),
        "10\\.0\\.[0-9]{1,3}\\.[0-9]{1,3}".prop_map(Some),
        "fd00::[0-9a-f]{1,4}".prop_map(Some),
    ];
    let ports = prop::collection::vec(
        (
            prop::option::of("[a-z]([a-z0-9-]{0,6}[a-z0-9])?"),
            1..65535i32,
            prop::option::of(prop_oneof![Just("TCP"), Just("UDP"), Just("SCTP")]),
        ),
        0..4,
    );
    let namespace = prop_oneof![Just("default"), Just("app"), Just("other")];
    let name = prop_oneof![Just("kubernetes".to_owned()), "[a-z]([a-z0-9-]{0,8}[a-z0-9])?"];
    (namespace, name, ip, ports).prop_map(|(namespace, name, ip, ports)| {
        let ports = ports.iter().map(|(n, p, proto)| port(n.as_deref(), *p, *proto)).collect();
        service(namespace, &name, ip.as_deref(), ports)
    })
}

proptest! {
    /// K1: no variable comes from a Service without a cluster IP, from another
    /// namespace than the pod's or `default`'s `kubernetes`, nor from the pod's
    /// namespace without links; every variable names a counted Service.
    #[test]
    fn k1_only_counted_services_give_variables(
        services in prop::collection::vec(arb_service(), 0..6),
        links in any::<bool>(),
    ) {
        let env = service_env("app", links, &services);
        let counted: Vec<&Service> = services.iter().filter(|s| {
            let ns = s.metadata.namespace.as_deref().unwrap_or_default();
            let name = s.metadata.name.as_deref().unwrap_or_default();
            has_cluster_ip(s)
                && ((ns == "default" && name == "kubernetes") || (ns == "app" && links))
        }).collect();
        let prefixes: Vec<String> = counted
            .iter()
            .map(|s| variable_name(s.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        for name in env.keys() {
            prop_assert!(
                prefixes.iter().any(|p| name.starts_with(&format!("{p}_"))),
                "{name} is of no counted Service"
            );
        }
        for s in &counted {
            let host = format!(
                "{}_SERVICE_HOST",
                variable_name(s.metadata.name.as_deref().unwrap_or_default())
            );
            prop_assert!(env.contains_key(&host), "{host} missing");
        }
    }
}
