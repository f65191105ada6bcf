use serde_json::json;

use super::*;

fn pod(containers: &[&str]) -> Value {
    let containers: Vec<Value> = containers.iter().map(|c| json!({"name": c})).collect();
    json!({"metadata": {"name": "web", "namespace": "demo"},
           "spec": {"nodeName": "edge-1", "containers": containers}})
}

fn node() -> Value {
    json!({"metadata": {"name": "edge-1"}, "status": {
        "addresses": [{"type": "Hostname", "address": "edge-1"}, {"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 18250}}}})
}

fn exec() -> Proxied {
    Proxied::Pod { namespace: "demo".into(), name: "web".into(), subresource: PodSubresource::Exec }
}

#[test]
fn routes_are_the_proxied_subresources_only() {
    assert_eq!(route("/api/v1/namespaces/demo/pods/web/exec"), Some(exec()));
    assert_eq!(
        route("/api/v1/namespaces/demo/pods/web/portforward"),
        Some(Proxied::Pod {
            namespace: "demo".into(),
            name: "web".into(),
            subresource: PodSubresource::PortForward
        })
    );
    assert_eq!(
        route("/api/v1/nodes/edge-1/proxy/stats/summary"),
        Some(Proxied::Node { name: "edge-1".into(), path: "/stats/summary".into() })
    );
    assert_eq!(
        route("/api/v1/nodes/edge-1/proxy"),
        Some(Proxied::Node { name: "edge-1".into(), path: "/".into() })
    );
    assert_eq!(route("/api/v1/namespaces/demo/pods/web/status"), None);
    assert_eq!(route("/api/v1/namespaces/demo/pods/web"), None);
    assert_eq!(route("/apis/apps/v1/namespaces/demo/deployments/web/exec"), None);
}

#[test]
fn exec_becomes_kubelets_query_with_the_only_container_defaulted() {
    let query =
        "command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&stderr=true&tty=false";
    let at = location(&exec(), Some(&pod(&["app"])), &node(), query).unwrap();
    assert_eq!(at.host, "127.0.0.1");
    assert_eq!(at.port, 18250);
    assert_eq!(
        at.path_and_query,
        "/exec/demo/web/app?command=sh&command=-c&command=echo+hi&error=1&input=1&output=1"
    );
}

#[test]
fn a_tty_is_passed_and_attach_has_no_command() {
    let attach = Proxied::Pod {
        namespace: "demo".into(),
        name: "web".into(),
        subresource: PodSubresource::Attach,
    };
    let at = location(
        &attach,
        Some(&pod(&["app"])),
        &node(),
        "container=app&stdin=1&stdout=1&tty=1&command=x",
    )
    .unwrap();
    assert_eq!(at.path_and_query, "/attach/demo/web/app?input=1&output=1&tty=1");
}

#[test]
fn a_pod_with_several_containers_needs_one_named() {
    let err =
        location(&exec(), Some(&pod(&["app", "sidecar"])), &node(), "stdout=true").unwrap_err();
    assert_eq!(
        err.to_string(),
        "a container name must be specified for pod web, choose one of: [app sidecar]"
    );
    let err =
        location(&exec(), Some(&pod(&["app"])), &node(), "container=db&stdout=true").unwrap_err();
    assert_eq!(err.to_string(), "container db is not valid for pod web");
    let at =
        location(&exec(), Some(&pod(&["app", "sidecar"])), &node(), "container=sidecar&stdout=1")
            .unwrap();
    assert_eq!(at.path_and_query, "/exec/demo/web/sidecar?output=1");
}

#[test]
fn port_forward_joins_the_ports_in_one_port_parameter() {
    let pf = Proxied::Pod {
        namespace: "demo".into(),
        name: "web".into(),
        subresource: PodSubresource::PortForward,
    };
    let at = location(&pf, Some(&pod(&["app"])), &node(), "ports=80&ports=8443").unwrap();
    assert_eq!(at.path_and_query, "/portForward/demo/web?port=80%2C8443");
    let at = location(&pf, Some(&pod(&["app"])), &node(), "").unwrap();
    assert_eq!(at.path_and_query, "/portForward/demo/web");
}

#[test]
fn logs_keep_their_options_and_drop_others() {
    let log = Proxied::Pod {
        namespace: "demo".into(),
        name: "web".into(),
        subresource: PodSubresource::Log,
    };
    let at = location(&log, Some(&pod(&["app"])), &node(), "follow=true&tailLines=10&pretty=true")
        .unwrap();
    assert_eq!(at.path_and_query, "/containerLogs/demo/web/app?follow=true&tailLines=10");
}

#[test]
fn node_proxy_passes_path_and_query() {
    let proxied = Proxied::Node { name: "edge-1".into(), path: "/stats/summary".into() };
    let at = location(&proxied, None, &node(), "only_cpu_and_memory=true").unwrap();
    assert_eq!(at.path_and_query, "/stats/summary?only_cpu_and_memory=true");
}

#[test]
fn the_node_address_prefers_internal_ip_and_defaults_the_port() {
    let bare = json!({"metadata": {"name": "n"}, "status": {"addresses": [{"type": "Hostname", "address": "n"}]}});
    let proxied = Proxied::Node { name: "n".into(), path: "/healthz".into() };
    let at = location(&proxied, None, &bare, "").unwrap();
    assert_eq!((at.host.as_str(), at.port), ("n", 10250));
    let none = json!({"metadata": {"name": "n"}, "status": {}});
    assert!(location(&proxied, None, &none, "").is_err());
}

#[test]
fn an_unscheduled_pod_has_no_host() {
    let pod = json!({"spec": {"containers": [{"name": "app"}]}});
    assert_eq!(
        node_name(&pod, "web").unwrap_err().to_string(),
        "pod web does not have a host assigned"
    );
}

#[test]
fn a_bad_boolean_is_a_bad_request() {
    let err = location(&exec(), Some(&pod(&["app"])), &node(), "stdout=yes").unwrap_err();
    assert!(err.to_string().contains("invalid boolean"), "{err}");
}
