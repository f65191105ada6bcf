//! K1: the pod specs of two DaemonSets every cluster runs on each node, as their
//! projects ship them, run as API pods: kube-proxy's (kubeadm's `kube-proxy` addon) and
//! flannel's (`kube-flannel.yml`). Their shape is kept (host network, privileged or
//! added capabilities, the service account, `priorityClassName: system-node-critical`,
//! `tolerations`, `nodeSelector`/affinity, their ConfigMap volumes, downward API
//! variables, flannel's init containers); two things stand in:
//!
//! - the program: the kubectl image runs the in-cluster calls the program makes at
//!   start (kube-proxy gets its Node; flanneld gets its own pod to learn its node, then
//!   the Node), then serves;
//! - the host paths: each points into the test node's directory instead of the host's
//!   `/run`, `/lib/modules`, `/opt/cni/bin` and `/etc/cni/net.d`, so that the test
//!   writes nothing on the host (flannel's init containers install into them) and does
//!   not depend on the host having them.

use outpost_tests::needs;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

use outpost_tests::api_pods::{Cluster, LONG, NODE, SERVE};

use super::{KUBECTL_IMAGE, wait_file, with_kubectl};

/// A host path of the test node standing in for `path` (made by the test).
fn host_dir(c: &Cluster, path: &str) -> String {
    let dir = c.api.node.path(&format!("host{path}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

/// A host file (as `FileOrCreate` makes it) of the test node standing in for `path`.
fn host_file(c: &Cluster, path: &str) -> String {
    c.api.node.path(&format!("host{path}")).to_string_lossy().into_owned()
}

fn service_account(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
}

fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data})
}

/// kubeadm's kube-proxy DaemonSet pod (the program stands in, see the module).
fn kube_proxy(c: &Cluster) -> Value {
    let script = r#"kubectl get node "$NODE_NAME" -o name > /tmp/out 2>&1 && test -s /var/lib/kube-proxy/config.conf && touch /tmp/ok; "#;
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-proxy-x7k2p",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-proxy"},
        },
        "spec": {
            "nodeName": NODE,
            "containers": [{
                "name": "kube-proxy",
                "image": KUBECTL_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                // kubeadm: /usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf
                // --hostname-override=$(NODE_NAME)
                "command": ["sh", "-c", format!("{script}{SERVE}")],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "securityContext": {"privileged": true},
                "volumeMounts": [
                    {"mountPath": "/var/lib/kube-proxy", "name": "kube-proxy"},
                    {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
                    {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": true},
                ],
            }],
            "dnsPolicy": "ClusterFirst",
            "hostNetwork": true,
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "priorityClassName": "system-node-critical",
            "restartPolicy": "Always",
            "serviceAccountName": "kube-proxy",
            "terminationGracePeriodSeconds": 2,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [
                {"name": "kube-proxy", "configMap": {"name": "kube-proxy"}},
                {"name": "xtables-lock", "hostPath": {"path": host_file(c, "/run/xtables.lock"), "type": "FileOrCreate"}},
                {"name": "lib-modules", "hostPath": {"path": host_dir(c, "/lib/modules")}},
            ],
        },
    })
}

/// flannel's `kube-flannel.yml` DaemonSet pod (the programs stand in, see the module).
fn flannel(c: &Cluster) -> Value {
    let script = r#"node=$(kubectl get pod "$POD_NAME" -n "$POD_NAMESPACE" -o 'jsonpath={.spec.nodeName}') && kubectl get node "$node" -o name > /tmp/out 2>&1 && touch /tmp/ok; "#;
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-flannel-ds-4mwq9",
            "namespace": "kube-flannel",
            "labels": {"app": "flannel", "k8s-app": "flannel", "tier": "node"},
        },
        "spec": {
            "nodeName": NODE,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}],
            }}},
            "hostNetwork": true,
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "serviceAccountName": "flannel",
            "terminationGracePeriodSeconds": 2,
            "initContainers": [
                {
                    "name": "install-cni-plugin",
                    "image": KUBECTL_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    // flannel: cp -f /flannel /opt/cni/bin/flannel
                    "command": ["sh", "-c", "cat /bin/busybox > /opt/cni/bin/flannel"],
                    "volumeMounts": [{"name": "cni-plugin", "mountPath": "/opt/cni/bin"}],
                },
                {
                    "name": "install-cni",
                    "image": KUBECTL_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    // flannel: cp -f /etc/kube-flannel/cni-conf.json /etc/cni/net.d/10-flannel.conflist
                    "command": ["sh", "-c", "cat /etc/kube-flannel/cni-conf.json > /etc/cni/net.d/10-flannel.conflist"],
                    "volumeMounts": [
                        {"name": "cni", "mountPath": "/etc/cni/net.d"},
                        {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
                    ],
                },
            ],
            "containers": [{
                "name": "kube-flannel",
                "image": KUBECTL_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                // flannel: /opt/bin/flanneld --ip-masq --kube-subnet-mgr
                "command": ["sh", "-c", format!("{script}{SERVE}")],
                "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                "securityContext": {"privileged": false, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
                    {"name": "CONT_WHEN_CACHE_NOT_READY", "value": "false"},
                ],
                "volumeMounts": [
                    {"name": "run", "mountPath": "/run/flannel"},
                    {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"},
                    {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                ],
            }],
            "volumes": [
                {"name": "run", "hostPath": {"path": host_dir(c, "/run/flannel")}},
                {"name": "cni-plugin", "hostPath": {"path": host_dir(c, "/opt/cni/bin")}},
                {"name": "cni", "hostPath": {"path": host_dir(c, "/etc/cni/net.d")}},
                {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}},
                {"name": "xtables-lock", "hostPath": {"path": host_file(c, "/run/xtables.lock"), "type": "FileOrCreate"}},
            ],
        },
    })
}

const CNI_CONF: &str = r#"{"name": "cbr0", "cniVersion": "0.3.1", "plugins": [{"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}}, {"type": "portmap", "capabilities": {"portMappings": true}}]}"#;

/// K1: kube-proxy's and flannel's DaemonSet pods run as API pods, and their in-cluster
/// calls (their service accounts' tokens, the `kubernetes` Service's variables, the CA)
/// reach the API server; flannel's init containers install into its host paths.
#[needs(pods)]
#[test]
fn k1_kube_proxy_and_flannel_daemonset_pods_run_with_in_cluster_config() {
    let c = with_kubectl();
    c.create(service_account("kube-system", "kube-proxy"));
    c.create(config_map("kube-system", "kube-proxy", json!({
        "config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n",
        "kubeconfig.conf": "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n    server: https://control-plane.example:6443\n  name: default\n",
    })));
    c.create(service_account("kube-flannel", "flannel"));
    c.create(config_map("kube-flannel", "kube-flannel-cfg", json!({
        "cni-conf.json": CNI_CONF,
        "net-conf.json": r#"{"Network": "10.244.0.0/16", "EnableNFTables": false, "Backend": {"Type": "vxlan"}}"#,
    })));
    c.create_pod(kube_proxy(&c));
    c.create_pod(flannel(&c));

    let proxy = wait_file(&c, "kube-system", "kube-proxy-x7k2p", "kube-proxy", "/tmp/ok");
    assert_eq!(proxy, "");
    let pid = c.pid_of("kube-system", "kube-proxy-x7k2p", "kube-proxy");
    let out = std::fs::read_to_string(super::inside(pid, "/tmp/out")).unwrap();
    assert_eq!(out.trim(), format!("node/{NODE}"));

    wait_file(&c, "kube-flannel", "kube-flannel-ds-4mwq9", "kube-flannel", "/tmp/ok");
    let pid = c.pid_of("kube-flannel", "kube-flannel-ds-4mwq9", "kube-flannel");
    let out = std::fs::read_to_string(super::inside(pid, "/tmp/out")).unwrap();
    assert_eq!(out.trim(), format!("node/{NODE}"));
    let installed =
        std::fs::read_to_string(format!("{}/10-flannel.conflist", host_dir(&c, "/etc/cni/net.d")))
            .unwrap();
    assert_eq!(installed, CNI_CONF);
    assert!(std::path::Path::new(&format!("{}/flannel", host_dir(&c, "/opt/cni/bin"))).is_file());

    // Each pod's namespace and the kubernetes Service: three Service watches.
    eventually("three Service watches", LONG, || c.server().watchers("services") == 3);
}
