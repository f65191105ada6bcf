//! End to end: static pods shaped as the ones real nodes run (kubeadm's control-plane
//! kube-scheduler, kube-vip, and the haproxy and keepalived pair of kubeadm's HA guide),
//! busybox standing in for each image: every field they carry is honoured (host network,
//! priority class, seccomp RuntimeDefault, capabilities, hostAliases, hostPath files
//! read-only, HTTP probes on the host's loopback) or the pod would be refused. kubeadm's
//! etcd runs with its real image in `etcd.rs`.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::workload::{Workload, delete_and_wait, free_ports, host_dir, status_of};

const LONG: Duration = Duration::from_secs(90);

/// What the container wrote to its log.
fn logs(w: &Workload, pod: &str, container: &str) -> String {
    w.logs("kube-system", pod, container)
}

/// A stand-in that reports what the pod gave it, then serves `/healthz` on the host's
/// loopback `port` (busybox httpd), as the component would.
fn serving(report: &str, port: u16) -> String {
    format!(
        "{report}; mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 127.0.0.1:{port} -h /www"
    )
}

/// The effective capability mask the kernel gives the stand-in, and its seccomp mode.
const KERNEL_VIEW: &str = "grep -E '^(CapEff|Seccomp):' /proc/self/status";

#[needs(pods)]
#[test]
fn control_plane_and_load_balancer_static_pods_run_with_every_field_honoured() {
    let node = Node::new();
    let etc = host_dir(&node, "etc-kubernetes");
    std::fs::write(etc.join("scheduler.conf"), "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::write(etc.join("admin.conf"), "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::write(etc.join("haproxy.cfg"), "frontend apiserver\n  bind *:8443\n").unwrap();
    std::fs::write(etc.join("keepalived.conf"), "vrrp_instance VI_1 {\n}\n").unwrap();
    std::fs::write(etc.join("check_apiserver.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let etc = etc.display();
    let w = Workload::start(&node);
    let [scheduler_port, haproxy_port] = free_ports::<2>();

    // kubeadm's kube-scheduler manifest, its command replaced.
    let scheduler = serving(
        &format!(
            "{KERNEL_VIEW}; cat /etc/kubernetes/scheduler.conf; touch /etc/kubernetes/scheduler.conf 2>/dev/null || echo read-only"
        ),
        scheduler_port,
    );
    node.put(
        "kube-scheduler.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    component: kube-scheduler
    tier: control-plane
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - command: ["sh", "-c", "{scheduler}"]
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /healthz
        port: {scheduler_port}
        scheme: HTTP
      initialDelaySeconds: 1
      periodSeconds: 10
      timeoutSeconds: 15
    name: kube-scheduler
    resources:
      requests:
        cpu: 100m
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /healthz
        port: {scheduler_port}
        scheme: HTTP
      initialDelaySeconds: 1
      periodSeconds: 1
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /etc/kubernetes/scheduler.conf
      name: kubeconfig
      readOnly: true
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: {etc}/scheduler.conf
      type: FileOrCreate
    name: kubeconfig
status: {{}}
"#
        ),
    );

    // kube-vip's static pod (ARP mode), as `kube-vip manifest pod` writes it.
    let vip = format!(
        "{KERNEL_VIEW}; grep kubernetes /etc/hosts; echo vip_interface=$vip_interface address=$address; exec sleep 3600"
    );
    node.put(
        "kube-vip.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  name: kube-vip
  namespace: kube-system
spec:
  containers:
  - command: ["sh", "-c", "{vip}"]
    env:
    - name: vip_arp
      value: "true"
    - name: port
      value: "6443"
    - name: vip_interface
      value: lo
    - name: vip_cidr
      value: "32"
    - name: cp_enable
      value: "true"
    - name: cp_namespace
      value: kube-system
    - name: vip_leaderelection
      value: "true"
    - name: address
      value: 127.0.0.1
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    name: kube-vip
    resources: {{}}
    securityContext:
      capabilities:
        add:
        - NET_ADMIN
        - NET_RAW
        drop:
        - ALL
    volumeMounts:
    - mountPath: /etc/kubernetes/admin.conf
      name: kubeconfig
  hostAliases:
  - hostnames:
    - kubernetes
    ip: 127.0.0.1
  hostNetwork: true
  volumes:
  - hostPath:
      path: {etc}/admin.conf
    name: kubeconfig
status: {{}}
"#
        ),
    );

    // kubeadm's HA guide: haproxy and keepalived as static pods.
    let haproxy = serving("cat /usr/local/etc/haproxy/haproxy.cfg", haproxy_port);
    node.put(
        "haproxy.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: haproxy
  namespace: kube-system
spec:
  containers:
  - image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "{haproxy}"]
    name: haproxy
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: localhost
        path: /healthz
        port: {haproxy_port}
        scheme: HTTP
    volumeMounts:
    - mountPath: /usr/local/etc/haproxy/haproxy.cfg
      name: haproxyconf
      readOnly: true
  hostNetwork: true
  volumes:
  - hostPath:
      path: {etc}/haproxy.cfg
      type: FileOrCreate
    name: haproxyconf
status: {{}}
"#
        ),
    );
    let keepalived = format!(
        "{KERNEL_VIEW}; cat /usr/local/etc/keepalived/keepalived.conf; sh /etc/keepalived/check_apiserver.sh && echo check-ok; exec sleep 3600"
    );
    node.put(
        "keepalived.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  name: keepalived
  namespace: kube-system
spec:
  containers:
  - image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "{keepalived}"]
    name: keepalived
    resources: {{}}
    securityContext:
      capabilities:
        add:
        - NET_ADMIN
        - NET_BROADCAST
        - NET_RAW
    volumeMounts:
    - mountPath: /usr/local/etc/keepalived/keepalived.conf
      name: config
    - mountPath: /etc/keepalived/check_apiserver.sh
      name: check
  hostNetwork: true
  volumes:
  - hostPath:
      path: {etc}/keepalived.conf
    name: config
  - hostPath:
      path: {etc}/check_apiserver.sh
    name: check
status: {{}}
"#
        ),
    );

    let ready = |p: &serde_json::Value, container: &str| status_of(p, container)["ready"] == true;
    for (pod, container) in [
        ("kube-scheduler-edge-1", "kube-scheduler"),
        ("kube-vip-edge-1", "kube-vip"),
        ("haproxy-edge-1", "haproxy"),
        ("keepalived-edge-1", "keepalived"),
    ] {
        let p = wait_pod(&w.agent, pod, LONG, |p| ready(p, container));
        assert_eq!(p["status"]["phase"], "Running", "{pod}");
        assert_eq!(status_of(&p, container)["restartCount"], 0, "{pod}: no probe killed it");
    }

    // CAP_NET_ADMIN is bit 12, CAP_NET_RAW 13, CAP_NET_BROADCAST 11.
    let caps = |log: &str| {
        let hex = log.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap_or_default();
        u64::from_str_radix(hex.trim(), 16).unwrap_or(0)
    };
    let (net_broadcast, net_admin, net_raw) = (1u64 << 11, 1u64 << 12, 1u64 << 13);
    eventually("the stand-ins reported", LONG, || {
        logs(&w, "kube-scheduler-edge-1", "kube-scheduler").contains("read-only")
            && logs(&w, "kube-vip-edge-1", "kube-vip").contains("address=")
            && logs(&w, "keepalived-edge-1", "keepalived").contains("check-ok")
    });
    let scheduler = logs(&w, "kube-scheduler-edge-1", "kube-scheduler");
    assert!(scheduler.contains("Seccomp:\t2"), "seccomp RuntimeDefault filters: {scheduler}");
    assert!(scheduler.contains("kind: Config"), "the kubeconfig is mounted: {scheduler}");
    assert!(scheduler.contains("read-only"), "and read-only: {scheduler}");
    let vip = logs(&w, "kube-vip-edge-1", "kube-vip");
    assert_eq!(caps(&vip), net_admin | net_raw, "drop ALL, then add NET_ADMIN, NET_RAW: {vip}");
    assert!(vip.contains("Seccomp:\t0"), "no profile asked: unconfined, as kubelet: {vip}");
    assert!(vip.contains("127.0.0.1\tkubernetes"), "hostAliases in /etc/hosts: {vip}");
    assert!(vip.contains("vip_interface=lo address=127.0.0.1"), "{vip}");
    assert!(logs(&w, "haproxy-edge-1", "haproxy").contains("bind *:8443"));
    let keepalived = logs(&w, "keepalived-edge-1", "keepalived");
    let added = net_admin | net_broadcast | net_raw;
    assert_eq!(caps(&keepalived) & added, added, "the added capabilities: {keepalived}");
    assert!(keepalived.contains("vrrp_instance"), "{keepalived}");

    // The priority class is known without an API server.
    let describe = std::process::Command::new(outpost_tests::outpost_bin())
        .args(["describe", "kube-system/kube-scheduler-edge-1"])
        .args(["--server", &format!("http://{}", w.agent.addr)])
        .output()
        .unwrap();
    assert!(describe.status.success(), "{}", String::from_utf8_lossy(&describe.stderr));
    let describe = String::from_utf8_lossy(&describe.stdout);
    assert!(describe.contains("2000001000"), "{describe}");
    assert!(describe.contains("system-node-critical"), "{describe}");

    delete_and_wait(
        &node,
        &w.agent,
        &[
            ("kube-scheduler.yaml", "kube-scheduler-edge-1"),
            ("kube-vip.yaml", "kube-vip-edge-1"),
            ("haproxy.yaml", "haproxy-edge-1"),
            ("keepalived.yaml", "keepalived-edge-1"),
        ],
    );
}
