//! End to end: pod-spec fields kubelet runs that issue 50 took out of the refusals (A1),
//! each in a real pod on the real containerd and runc: `seLinuxOptions` on a host without
//! SELinux, `hostnameOverride`, `env[].valueFrom.fileKeyRef`.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, wait_pod};
use outpost_tests::workload::{delete_and_wait, is_running, pretty, status_of};

const LONG: Duration = Duration::from_secs(60);

/// A1: a pod shaped as a chart renders it for SELinux hosts (pod-level MCS level,
/// a container's type) runs here as under kubelet, SELinux being off: containerd's CRI
/// gives no label, so the container's OCI spec has no `process.selinuxLabel` and no
/// `linux.mountLabel`.
#[needs(pods)]
#[test]
fn a1_selinux_options_run_where_selinux_is_off() {
    assert!(
        !std::path::Path::new("/sys/fs/selinux/enforce").exists(),
        "this test is for a host without SELinux"
    );
    let node = Node::new();
    let agent = node.start();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: release
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    fsGroup: 2000
    seLinuxOptions:
      level: "s0:c123,c456"
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: web
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
      seLinuxOptions:
        type: spc_t
"#
    );
    node.put("web.yaml", &yaml);
    let pod = wait_pod(&agent, "web-edge-1", LONG, |p| is_running(status_of(p, "web")));
    assert!(is_running(status_of(&pod, "web")), "{}", pretty(&pod));
    for id in node.containers() {
        let info = node.ctr(&["containers", "info", &id]);
        let info: serde_json::Value = serde_json::from_str(&info).unwrap();
        let spec = &info["Spec"];
        assert!(spec["process"].is_object(), "{info}");
        assert!(spec["process"].get("selinuxLabel").is_none(), "{spec}");
        assert!(spec["linux"].get("mountLabel").is_none(), "{spec}");
    }
    delete_and_wait(&node, &agent, &[("web.yaml", "web-edge-1")]);
}

/// KEP-4762: `hostnameOverride` is the pod's hostname, over `hostname`, and the only name
/// of its IP in `/etc/hosts` (no domain), as kubelet 1.34 makes them.
#[needs(pods)]
#[test]
fn a1_hostname_override_is_the_containers_hostname() {
    let node = Node::new();
    let agent = node.start();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: gateway
spec:
  restartPolicy: Never
  hostname: custom-host
  hostnameOverride: gw-7.plant.example.com
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'hostname; cat /proc/sys/kernel/hostname; grep -v -e localhost -e "^#" -e "^fe00" -e "^$" /etc/hosts']
"#
    );
    node.put("gateway.yaml", &yaml);
    let pod = finished(&agent, "gateway-edge-1");
    assert_eq!(pod["status"]["phase"], "Succeeded", "{}", pretty(&pod));
    let lines: Vec<String> =
        log(&agent, "gateway-edge-1", "app").lines().map(str::to_owned).collect();
    assert_eq!(lines[..2], ["gw-7.plant.example.com", "gw-7.plant.example.com"], "{lines:?}");
    let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
    assert_eq!(lines[2..], [format!("{ip}\tgw-7.plant.example.com")], "{lines:?}");
    delete_and_wait(&node, &agent, &[("gateway.yaml", "gateway-edge-1")]);
}

/// KEP-3721: an init container writes an env file into an emptyDir; the app container's
/// `fileKeyRef` variables are its keys (an optional missing key is left out), and a
/// required key that is missing keeps a container from being created, naming the key.
#[needs(pods)]
#[test]
fn a1_file_key_ref_reads_the_env_file_an_init_container_wrote() {
    let node = Node::new();
    let agent = node.start();
    let yaml = format!(
        r##"apiVersion: v1
kind: Pod
metadata:
  name: envfile
spec:
  restartPolicy: Never
  volumes:
  - name: config
    emptyDir: {{}}
  initContainers:
  - name: setup
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'printf "# made at start\nDB_HOST=db.plant.internal\nDB_PORT=5432\n" > /config/app.env']
    volumeMounts:
    - name: config
      mountPath: /config
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'echo "$DB_HOST:$DB_PORT ${{DB_USER-unset}}"']
    env:
    - name: DB_HOST
      valueFrom:
        fileKeyRef: {{volumeName: config, path: app.env, key: DB_HOST}}
    - name: DB_PORT
      valueFrom:
        fileKeyRef: {{volumeName: config, path: app.env, key: DB_PORT, optional: false}}
    - name: DB_USER
      valueFrom:
        fileKeyRef: {{volumeName: config, path: app.env, key: DB_USER, optional: true}}
  - name: strict
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'echo started']
    env:
    - name: DB_PASSWORD
      valueFrom:
        fileKeyRef: {{volumeName: config, path: app.env, key: DB_PASSWORD}}
"##
    );
    node.put("envfile.yaml", &yaml);
    let pod = wait_pod(&agent, "envfile-edge-1", LONG, |p| {
        status_of(p, "app")["state"]["terminated"].is_object()
            && status_of(p, "strict")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    let app = status_of(&pod, "app");
    assert_eq!(app["state"]["terminated"]["exitCode"], 0, "{}", pretty(&pod));
    assert_eq!(log(&agent, "envfile-edge-1", "app").trim(), "db.plant.internal:5432 unset");
    let message =
        status_of(&pod, "strict")["state"]["waiting"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("environment variable key \"DB_PASSWORD\" not found"), "{message}");
    delete_and_wait(&node, &agent, &[("envfile.yaml", "envfile-edge-1")]);
}

/// The log of a container of a pod through the agent.
fn log(agent: &Agent, pod: &str, container: &str) -> String {
    let (status, body) = agent.get(&format!("/containerLogs/default/{pod}/{container}"));
    assert_eq!(status, 200, "logs of {pod}/{container}: {body}");
    body
}

fn finished(agent: &Agent, pod: &str) -> serde_json::Value {
    wait_pod(agent, pod, LONG, |p| {
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    })
}
