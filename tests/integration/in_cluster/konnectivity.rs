//! Nodes behind NAT (issue 34, item 5): Konnectivity's agent is how an API server reaches
//! nodes it cannot dial, and it runs on an Outpost node as a DaemonSet pod. This runs the
//! pod shape of kubernetes.io's "Set up Konnectivity service" agent DaemonSet: host
//! network, `priorityClassName: system-cluster-critical`, the `CriticalAddonsOnly`
//! toleration, its own service account, and a projected service account token for the
//! audience `system:konnectivity-server` that the agent presents to the server, plus
//! its health port behind a liveness probe. The program stands in (no image of it can
//! be pulled here): busybox serves the health endpoint, and the test checks the token
//! the agent would send (signed by the server, for that audience, bound to the pod).

use outpost_tests::api_pods::{Cluster, LONG, NODE, inside};
use outpost_tests::cluster::ApiNode;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::kubectl::free_port;
use outpost_tests::needs;
use outpost_tests::pods::eventually;
use serde_json::json;

const TOKEN_DIR: &str = "/var/run/secrets/tokens";
const TOKEN_FILE: &str = "konnectivity-agent-token";

#[needs(pods)]
#[test]
fn konnectivity_agent_pod_shape_runs_with_its_audience_bound_token() {
    let c = Cluster::with(ApiNode::new(), &[]);
    c.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "konnectivity-agent", "namespace": "kube-system"}}));
    let health = free_port();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "konnectivity-agent-4qvzm",
            "namespace": "kube-system",
            "labels": {"k8s-app": "konnectivity-agent"},
        },
        "spec": {
            "nodeName": NODE,
            "priorityClassName": "system-cluster-critical",
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "hostNetwork": true,
            "serviceAccountName": "konnectivity-agent",
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "konnectivity-agent",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                // The real one: /proxy-agent --logtostderr=true --ca-cert=... --proxy-server-host=...
                // --proxy-server-port=8132 --admin-server-port=8133 --health-server-port=8134
                // --service-account-token-path=/var/run/secrets/tokens/konnectivity-agent-token
                "command": ["sh", "-c", format!(
                    "test -s {TOKEN_DIR}/{TOKEN_FILE} && test -s /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
                     && mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 127.0.0.1:{health} -h /www"
                )],
                "volumeMounts": [{"mountPath": TOKEN_DIR, "name": "konnectivity-agent-token"}],
                "livenessProbe": {
                    "httpGet": {"host": "127.0.0.1", "port": health, "path": "/healthz"},
                    "initialDelaySeconds": 1,
                    "timeoutSeconds": 15,
                },
            }],
            "volumes": [{
                "name": "konnectivity-agent-token",
                "projected": {"sources": [{"serviceAccountToken": {
                    "path": TOKEN_FILE,
                    "audience": "system:konnectivity-server",
                }}]},
            }],
        },
    });
    c.create_pod(pod);
    let running = c.wait_in("kube-system", "konnectivity-agent-4qvzm", "running", |p| {
        p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).is_some_and(|statuses| {
            statuses.iter().any(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        })
    });
    let uid = running.metadata.uid.clone().unwrap();
    let pid = c.pid_of("kube-system", "konnectivity-agent-4qvzm", "konnectivity-agent");
    let token_path = inside(pid, &format!("{TOKEN_DIR}/{TOKEN_FILE}"));
    let token = std::fs::read_to_string(&token_path).unwrap();
    let claims = c.server().verify_token(token.trim()).unwrap();
    assert_eq!(claims.aud, vec!["system:konnectivity-server".to_owned()]);
    assert_eq!(claims.sub, "system:serviceaccount:kube-system:konnectivity-agent");
    assert_eq!(claims.kubernetes.pod.as_ref().map(|p| p.uid.clone()), Some(uid));
    // The health endpoint the probe checks answers on the host's loopback (host network).
    eventually("the agent's health port answers", LONG, || {
        std::net::TcpStream::connect(("127.0.0.1", health)).is_ok()
    });
    let restarts = c
        .pod_in("kube-system", "konnectivity-agent-4qvzm")
        .status
        .unwrap()
        .container_statuses
        .unwrap()[0]
        .restart_count;
    assert_eq!(restarts, 0, "the liveness probe passes");
}
