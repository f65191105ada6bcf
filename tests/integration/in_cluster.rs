//! End to end, K1: the API server's environment of API pods, through the real binary,
//! real pods and the test API server. A real `kubectl` in a pod reaches the server with
//! nothing but in-cluster configuration (the Service variables, the `kube-api-access-*`
//! token and CA); the pod's own variables win over the Services'; a Service of the
//! namespace gives its link variables, `enableServiceLinks: false` only the `kubernetes`
//! Service's; a Service changed while a container runs does not restart it; only the
//! Services needed are watched. `daemonsets` runs kube-proxy's and flannel's pod specs.
//! `konnectivity` runs the Konnectivity agent's pod shape (nodes behind NAT).

mod daemonsets;
mod konnectivity;

use outpost_tests::needs;
use std::collections::BTreeMap;

use outpost_tests::api_pods::{
    Cluster, LONG, SERVE, api_pod, container_id, container_status, environment, inside, state,
};
use outpost_tests::apiserver::{Fault, TestApiServer};
use outpost_tests::cluster::ApiNode;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

/// `cargo xtask images` builds it from the host's kubectl.
const KUBECTL_IMAGE: &str = "outpost.test/kubectl:latest";
const KUBECTL_OCI: &str = "kubectl-oci.tar";

/// A cluster with a TLS server and the kubectl image imported (a missing image fails the
/// test in CI, as every missing prerequisite).
fn with_kubectl() -> Cluster {
    let c = Cluster::with(ApiNode::with_server(TestApiServer::builder().tls()), &[]);
    outpost_tests::workload::import(&c.api.node, KUBECTL_OCI);
    c
}

/// Waits for the file `path` of the running container (what its script wrote when done)
/// and returns it.
fn wait_file(c: &Cluster, namespace: &str, name: &str, container: &str, path: &str) -> String {
    let pid = c.pid_of(namespace, name, container);
    let file = inside(pid, path);
    eventually(&format!("{name}: {path} written"), LONG, || file.exists());
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn service(namespace: &str, name: &str, ports: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": ports},
    })
}

/// K1's acceptance: `kubectl get pod` and `kubectl auth whoami` in an API pod, with only
/// in-cluster configuration (`KUBERNETES_SERVICE_HOST`/`_PORT`, the `kube-api-access-*`
/// token and `ca.crt`), over TLS. The pod is `hostNetwork: true`: the test API server
/// listens on the host's loopback (its certificate is for `127.0.0.1`), which a pod's
/// own network namespace cannot reach; its `kubernetes` Service is that address.
#[needs(pods)]
#[test]
fn k1_kubectl_in_a_pod_reaches_the_api_server_with_in_cluster_config() {
    let c = with_kubectl();
    let script = r#"kubectl get pod "$POD_NAME" > /tmp/get 2>&1; echo $? > /tmp/get.rc;
kubectl auth whoami > /tmp/whoami 2>&1; echo $? > /tmp/whoami.rc; touch /tmp/done; "#;
    let pod = api_pod(
        "kubectl",
        json!({
            "image": KUBECTL_IMAGE,
            "command": ["sh", "-c", format!("{script}{SERVE}")],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        }),
        json!({"hostNetwork": true}),
    );
    c.create_pod(pod);
    wait_file(&c, "default", "kubectl", "main", "/tmp/done");
    let pid = c.pid("kubectl");
    let read = |path: &str| std::fs::read_to_string(inside(pid, path)).unwrap();
    let (get, whoami) = (read("/tmp/get"), read("/tmp/whoami"));
    assert_eq!(read("/tmp/get.rc").trim(), "0", "kubectl get pod: {get}");
    assert!(get.lines().any(|l| l.starts_with("kubectl ")), "kubectl get pod printed {get:?}");
    assert_eq!(read("/tmp/whoami.rc").trim(), "0", "kubectl auth whoami: {whoami}");
    assert!(
        whoami.lines().any(|l| l
            .split_whitespace()
            .eq(["Username", "system:serviceaccount:default:default"])),
        "kubectl auth whoami printed {whoami:?}"
    );
    // The variables it used are the kubernetes Service's.
    let env = environment(pid);
    let port = c.server().addr().port().to_string();
    assert_eq!(env.get("KUBERNETES_SERVICE_HOST").map(String::as_str), Some("127.0.0.1"));
    assert_eq!(env.get("KUBERNETES_SERVICE_PORT"), Some(&port));
    assert_eq!(env.get("KUBERNETES_SERVICE_PORT_HTTPS"), Some(&port));
    assert_eq!(env.get("KUBERNETES_PORT"), Some(&format!("tcp://127.0.0.1:{port}")));
}

/// K1: a Service of the namespace gives its variables, the pod's own win, and without
/// service links only the `kubernetes` Service's come; a Service changed while the
/// container runs does not restart it (a new container sees the change). Only the
/// scopes the pods need are watched, and no longer once the pods are gone.
#[needs(pods)]
#[test]
fn k1_service_variables_links_and_the_pod_own_variables() {
    let c = Cluster::start();
    c.create(service(
        "default",
        "web-api",
        json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090, "protocol": "TCP"}]),
    ));
    let web = c.server().get("services", Some("default"), "web-api").unwrap();
    let ip = web["spec"]["clusterIP"].as_str().unwrap().to_owned();
    let own = json!({"env": [{"name": "WEB_API_SERVICE_HOST", "value": "mine"}, {"name": "URL", "value": "http://$(WEB_API_SERVICE_HOST):$(WEB_API_SERVICE_PORT)"}]});
    c.create_pod(api_pod("links", own, json!({})));
    c.create_pod(api_pod("nolinks", json!({}), json!({"enableServiceLinks": false})));

    let links = environment(c.pid("links"));
    let get = |env: &BTreeMap<String, String>, k: &str| env.get(k).cloned().unwrap_or_default();
    assert_eq!(get(&links, "WEB_API_SERVICE_HOST"), "mine");
    assert_eq!(get(&links, "WEB_API_SERVICE_PORT"), "80");
    assert_eq!(get(&links, "WEB_API_SERVICE_PORT_METRICS"), "9090");
    assert_eq!(get(&links, "WEB_API_PORT"), format!("tcp://{ip}:80"));
    assert_eq!(get(&links, "WEB_API_PORT_9090_TCP_ADDR"), ip);
    // `$(VAR)` sees the pod's own first, then the Services'.
    assert_eq!(get(&links, "URL"), "http://mine:80");
    assert_eq!(get(&links, "KUBERNETES_SERVICE_HOST"), "127.0.0.1");

    let nolinks = environment(c.pid("nolinks"));
    assert!(nolinks.keys().all(|k| !k.starts_with("WEB_API")), "{nolinks:?}");
    assert_eq!(get(&nolinks, "KUBERNETES_SERVICE_HOST"), "127.0.0.1");
    let port = c.server().addr().port().to_string();
    assert_eq!(get(&nolinks, "KUBERNETES_SERVICE_PORT"), port);
    assert_eq!(get(&nolinks, &format!("KUBERNETES_PORT_{port}_TCP_PROTO")), "tcp");

    // Two scopes: the services of `default` (the linking pod's, which holds the
    // kubernetes Service), and the kubernetes Service by name (the other pod's).
    // (Its watch opens just after the list that let the pods start.)
    eventually("two Service watches", LONG, || c.server().watchers("services") == 2);

    // A changed Service: the running container keeps its variables and is not
    // restarted; a container started afterwards sees the change.
    let before = container_id(&c.pod("links"), "main");
    let mut changed = c.server().get("services", Some("default"), "web-api").unwrap();
    changed["spec"]["ports"][0]["port"] = json!(8080);
    c.server().update(changed).unwrap();
    c.create_pod(api_pod("later", json!({}), json!({})));
    let later = environment(c.pid("later"));
    assert_eq!(get(&later, "WEB_API_SERVICE_PORT"), "8080");
    let links_now = c.pod("links");
    assert_eq!(container_id(&links_now, "main"), before);
    assert_eq!(container_status(&links_now, "main").map(|s| s.restart_count), Some(0));
    let pid = c.pid("links");
    assert_eq!(get(&environment(pid), "WEB_API_SERVICE_PORT"), "80");

    // The pods gone, nothing is watched.
    for name in ["links", "nolinks", "later"] {
        c.server().delete("pods", Some("default"), name, Some(0)).unwrap();
    }
    eventually("no Service watch left", LONG, || c.server().watchers("services") == 0);
}

/// K1 with V3: after a reboot without the API server, a pod's container starts again
/// with the Service variables it had (the Services kept in the objects' checkpoint count
/// as read).
#[needs(pods)]
#[test]
fn k1_after_an_offline_reboot_the_service_variables_come_from_the_checkpoint() {
    let mut c = Cluster::start();
    c.create(service("default", "web-api", json!([{"port": 80}])));
    let uid = c.create_pod(api_pod("app", json!({}), json!({}))).metadata.uid.unwrap();
    let before = environment(c.pid("app"));
    assert!(before.contains_key("WEB_API_SERVICE_HOST"), "{before:?}");

    let after = environment(c.reboot_offline("app", &uid));
    let services = |env: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        let mut env = env.clone();
        env.retain(|k, _| k.starts_with("KUBERNETES_") || k.starts_with("WEB_API_"));
        env
    };
    assert_eq!(services(&after), services(&before));
    assert!(after.contains_key("KUBERNETES_SERVICE_HOST"));
    c.api.rt.block_on(c.server().restore()).unwrap();
}

/// K1: an API pod's container does not start before its Services have been read once:
/// while the API server fails every list of them, it waits with kubelet's
/// `CreateContainerConfigError`; once a list succeeds it starts, with their variables.
#[needs(pods)]
#[test]
fn k1_an_api_pod_waits_until_its_services_have_been_read() {
    let c = Cluster::start();
    c.create(service("default", "web-api", json!([{"port": 80}])));
    c.server().fail_next(u64::MAX, "list", "services", Fault::internal_error());
    c.create_pod(api_pod("app", json!({}), json!({})));
    eventually("app: CreateContainerConfigError", LONG, || {
        c.server().get_pod("default", "app").is_ok_and(|p| {
            let waiting = &state(&p, "main")["waiting"];
            waiting["reason"] == "CreateContainerConfigError"
                && waiting["message"]
                    == "services have not yet been read at least once, cannot construct envvars"
        })
    });
    c.server().clear_faults();
    // The watcher's backoff is at most 30 s; then the pod is told and starts.
    let env = environment(c.pid("app"));
    assert!(env.contains_key("WEB_API_SERVICE_HOST"), "{env:?}");
}
