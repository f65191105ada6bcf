//! End to end: the pod-spec fields of issue 17's item 3 that set up the pod's namespaces,
//! kernel settings, names and files, each checked from inside real containers (real
//! containerd, runc and kernel): sysctls, hostPID, shareProcessNamespace, the pod's
//! /dev/shm, /etc/hosts, hostname and resolv.conf, termination messages, workingDir,
//! tty and imagePullPolicy Never.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::workload::{
    Workload, delete_and_wait, event_count, is_running, status_of, text,
};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// A long-running busybox container named `name`.
fn sleeper(name: &str) -> String {
    format!(
        "  - name: {name}\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 1; done']\n"
    )
}

/// Puts `<name>.yaml` (a pod named `name`, `spec` then its `containers`), waits until
/// every container in `names` runs; the pod.
fn run_pod(node: &Node, w: &Workload, name: &str, spec: &str, containers: &[&str]) -> Value {
    let body: String = containers.iter().map(|c| sleeper(c)).collect();
    node.put(
        &format!("{name}.yaml"),
        &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec}  containers:\n{body}"),
    );
    wait_pod(&w.agent, &format!("{name}-edge-1"), LONG, |p| {
        containers.iter().all(|c| is_running(status_of(p, c)))
    })
}

/// `outpost exec` in the pod's container; its stdout (it must succeed).
fn exec(w: &Workload, pod: &str, container: &str, command: &[&str]) -> String {
    let out = w.exec(&format!("default/{pod}-edge-1"), Some(container), command);
    assert!(out.status.success(), "exec {command:?} in {pod}/{container}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn end(node: &Node, w: &Workload, pods: &[&str]) {
    let named: Vec<(String, String)> =
        pods.iter().map(|p| (format!("{p}.yaml"), format!("{p}-edge-1"))).collect();
    let named: Vec<(&str, &str)> = named.iter().map(|(f, n)| (f.as_str(), n.as_str())).collect();
    delete_and_wait(node, &w.agent, &named);
}

/// The pid namespace (`pid:[inode]`) a process of the pod's container sees as its own.
fn pid_namespace(w: &Workload, pod: &str, container: &str) -> String {
    namespace(w, pod, container, "pid")
}

/// The namespace of `kind` (`<kind>:[inode]`) the pod's container is in.
fn namespace(w: &Workload, pod: &str, container: &str, kind: &str) -> String {
    let listing = exec(w, pod, container, &["ls", "-l", &format!("/proc/self/ns/{kind}")]);
    listing.rsplit("-> ").next().unwrap_or_default().trim().to_owned()
}

/// The pids of the `outpost pod-init` processes of this node.
fn pod_inits(node: &Node) -> Vec<String> {
    let root = node.dir.path().to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains("\0pod-init\0") && cmdline.contains(&root)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[needs(pods)]
#[test]
fn a_sysctl_is_set_in_the_pods_network_namespace() {
    let node = Node::new();
    let w = Workload::start(&node);
    let spec = "  securityContext:\n    sysctls:\n    - {name: net.ipv4.ip_local_port_range, value: '20000 40000'}\n";
    run_pod(&node, &w, "sysctl", spec, &["app"]);
    let range = exec(&w, "sysctl", "app", &["cat", "/proc/sys/net/ipv4/ip_local_port_range"]);
    assert_eq!(range.split_whitespace().collect::<Vec<_>>(), ["20000", "40000"]);
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    assert_ne!(
        host.split_whitespace().collect::<Vec<_>>(),
        ["20000", "40000"],
        "the host's is untouched"
    );
    end(&node, &w, &["sysctl"]);
}

#[needs(pods)]
#[test]
fn host_pid_and_host_ipc_are_the_hosts_namespaces() {
    let node = Node::new();
    let w = Workload::start(&node);
    run_pod(&node, &w, "hostpid", "  hostPID: true\n  hostIPC: true\n", &["app"]);
    run_pod(&node, &w, "ownpid", "", &["app"]);
    let host = |kind: &str| {
        std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap().to_string_lossy().into_owned()
    };
    assert_eq!(pid_namespace(&w, "hostpid", "app"), host("pid"));
    assert_ne!(pid_namespace(&w, "ownpid", "app"), host("pid"));
    assert_eq!(namespace(&w, "hostpid", "app", "ipc"), host("ipc"));
    assert_ne!(namespace(&w, "ownpid", "app", "ipc"), host("ipc"));

    // hostIPC: the host's /dev/shm.
    let note = format!("outpost-e2e-{}", std::process::id());
    exec(&w, "hostpid", "app", &["touch", &format!("/dev/shm/{note}")]);
    let on_host = std::path::Path::new("/dev/shm").join(&note);
    let seen = on_host.exists();
    let _ = std::fs::remove_file(&on_host);
    assert!(seen, "the file is in the host's /dev/shm");
    end(&node, &w, &["hostpid", "ownpid"]);
}

/// shareProcessNamespace: each container sees the other's processes, and pid 1 is the
/// pod's init (as pause is under kubelet); the init goes with the pod.
#[needs(pods)]
#[test]
fn share_process_namespace_shows_each_container_the_others_processes() {
    let node = Node::new();
    let w = Workload::start(&node);
    node.put(
        "shared.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: shared\nspec:\n  shareProcessNamespace: true\n  containers:\n{}  - name: marker\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [sleep, '4321']\n",
            sleeper("app")
        ),
    );
    wait_pod(&w.agent, "shared-edge-1", LONG, |p| {
        is_running(status_of(p, "app")) && is_running(status_of(p, "marker"))
    });
    let ps = exec(&w, "shared", "app", &["ps", "-o", "pid,args"]);
    assert!(ps.contains("sleep 4321"), "app sees marker's process: {ps}");
    let init = exec(&w, "shared", "marker", &["cat", "/proc/1/cmdline"]);
    assert!(init.contains("pod-init"), "pid 1 is the pod's init: {init:?}");
    assert_eq!(pod_inits(&node).len(), 1);

    // The pod's own pid namespace holds both, and no other pod's.
    let app = pid_namespace(&w, "shared", "app");
    assert_eq!(app, pid_namespace(&w, "shared", "marker"));
    assert!(app.starts_with("pid:["), "{app}");

    end(&node, &w, &["shared"]);
    eventually("the pod's init is gone", LONG, || pod_inits(&node).is_empty());
}

/// containerd CRI's sandbox shm: one 64 MiB tmpfs per pod, shared by its containers.
#[needs(pods)]
#[test]
fn dev_shm_is_64_mib_and_shared_by_the_pods_containers() {
    let node = Node::new();
    let w = Workload::start(&node);
    let p = run_pod(&node, &w, "shm", "", &["writer", "reader"]);
    let mounts = exec(&w, "shm", "writer", &["cat", "/proc/mounts"]);
    let shm = mounts.lines().find(|l| l.split_whitespace().nth(1) == Some("/dev/shm")).unwrap();
    let options: Vec<&str> = shm.split_whitespace().nth(3).unwrap().split(',').collect();
    for option in ["size=65536k", "nosuid", "nodev", "noexec"] {
        assert!(options.contains(&option), "{option} in {shm}");
    }
    exec(&w, "shm", "writer", &["sh", "-c", "echo shared > /dev/shm/note"]);
    assert_eq!(exec(&w, "shm", "reader", &["cat", "/dev/shm/note"]), "shared\n");
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let on_host = node.path("run/pods").join(uid).join("shm/note");
    assert_eq!(std::fs::read_to_string(on_host).unwrap(), "shared\n", "the pod's tmpfs");
    end(&node, &w, &["shm"]);
}

/// hostAliases, hostname, subdomain and setHostnameAsFQDN in /etc/hosts and the UTS
/// hostname; dnsPolicy None with dnsConfig; ClusterFirst falls back to the node's
/// resolver and says so once (MissingClusterDNS).
#[needs(pods)]
#[test]
fn hosts_hostname_and_resolv_conf_follow_the_pod() {
    let node = Node::new();
    let w = Workload::start(&node);
    let spec = "  hostname: db\n  subdomain: backend\n  setHostnameAsFQDN: true\n  hostAliases:\n  - {ip: 10.1.2.3, hostnames: [registry.lan, mirror.lan]}\n  dnsPolicy: None\n  dnsConfig:\n    nameservers: [192.0.2.53]\n    searches: [corp.example]\n    options:\n    - {name: ndots, value: '2'}\n    - {name: edns0}\n";
    let p = run_pod(&node, &w, "names", spec, &["app"]);
    let ip = p["status"]["podIP"].as_str().unwrap().to_owned();

    let hosts = exec(&w, "names", "app", &["cat", "/etc/hosts"]);
    assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n"), "{hosts}");
    assert!(
        hosts.contains(&format!("{ip}\tdb.backend.default.svc.cluster.local\tdb\n")),
        "{hosts}"
    );
    assert!(
        hosts.ends_with("# Entries added by HostAliases.\n10.1.2.3\tregistry.lan\tmirror.lan\n"),
        "{hosts}"
    );
    assert_eq!(exec(&w, "names", "app", &["hostname"]), "db.backend.default.svc.cluster.local\n");
    assert_eq!(
        exec(&w, "names", "app", &["cat", "/etc/resolv.conf"]),
        "search corp.example\nnameserver 192.0.2.53\noptions ndots:2 edns0\n"
    );

    // ClusterFirst (the default): the node's resolver, said once for the pod.
    run_pod(&node, &w, "cluster", "", &["app"]);
    let events = w.events("default", "cluster-edge-1");
    let prefix = "pod: \"cluster-edge-1_default(";
    assert_eq!(event_count(&events, "MissingClusterDNS", prefix), 1, "{events:?}");
    assert_eq!(exec(&w, "cluster", "app", &["hostname"]), "cluster-edge-1\n");
    end(&node, &w, &["names", "cluster"]);
}

/// terminationMessagePath and FallbackToLogsOnError fill terminated.message.
#[needs(pods)]
#[test]
fn termination_messages_come_from_the_file_or_the_logs() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: messages
spec:
  restartPolicy: Never
  containers:
  - name: file
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    command: [sh, -c, 'echo -n "migrated 42 rows" > /dev/termination-log']
  - name: custom
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    workingDir: /work/dir
    terminationMessagePath: /tmp/why
    command: [sh, -c, 'pwd > /tmp/why; exit 1']
  - name: logs
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    terminationMessagePolicy: FallbackToLogsOnError
    command: [sh, -c, 'echo starting; echo "config invalid: port"; exit 3']
"#
    );
    node.put("messages.yaml", &yaml);
    let terminated = |p: &Value, c: &str| status_of(p, c)["state"]["terminated"].clone();
    let p = wait_pod(&w.agent, "messages-edge-1", LONG, |p| {
        ["file", "custom", "logs"].iter().all(|c| terminated(p, c).is_object())
    });
    assert_eq!(terminated(&p, "file")["message"], "migrated 42 rows", "{p}");
    assert_eq!(terminated(&p, "file")["exitCode"], 0);
    assert_eq!(terminated(&p, "custom")["message"], "/work/dir\n", "workingDir: {p}");
    assert_eq!(terminated(&p, "logs")["message"], "starting\nconfig invalid: port\n", "{p}");
    assert_eq!(terminated(&p, "logs")["exitCode"], 3);
    end(&node, &w, &["messages"]);
}

/// tty: true starts with a terminal; imagePullPolicy Never with an absent image waits
/// in ErrImageNeverPull.
#[needs(pods)]
#[test]
fn tty_runs_with_a_terminal_and_never_pull_waits_for_the_image() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: tty
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: Never
    tty: true
    command: [sh, -c, 'if [ -t 0 ] && [ -t 1 ]; then echo -n terminal > /dev/termination-log; fi']
"#
    );
    node.put("tty.yaml", &yaml);
    let p = wait_pod(&w.agent, "tty-edge-1", LONG, |p| {
        status_of(p, "app")["state"]["terminated"].is_object()
    });
    assert_eq!(status_of(&p, "app")["state"]["terminated"]["message"], "terminal", "{p}");

    let absent = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: absent\nspec:\n  containers:\n  - name: app\n    image: outpost.test/not-imported:1\n    imagePullPolicy: Never\n";
    node.put("absent.yaml", absent);
    let p = wait_pod(&w.agent, "absent-edge-1", LONG, |p| {
        status_of(p, "app")["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    });
    assert_eq!(
        status_of(&p, "app")["state"]["waiting"]["message"],
        "Container image \"outpost.test/not-imported:1\" is not present with pull policy of Never"
    );
    end(&node, &w, &["tty", "absent"]);
}
